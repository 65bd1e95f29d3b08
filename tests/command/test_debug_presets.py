"""The debug presets from the command line: ``debug=fast`` (a few iterations, one evaluation, one
checkpoint), ``debug=overfit`` (one batch learned by heart, checked with the saved model on that
batch), ``debug=profile`` (time per stage adding up to the run's time) and ``debug=lr_find`` (the
range test: a suggestion and its command line, its two files in a folder of its own)."""

import json
import re
import time

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli

import trainer_run
from trainer_run.errors import ConfigError

QUIET = "trainer.progress=false"
STAGES = ("data", "forward", "backward", "communication", "update", "extensions")


@pytest.fixture(scope="module")
def noise(tmp_path_factory):
    """Pure-noise labels: only memorizing can fit them. The validation file keeps the
    training split whole and in file order."""
    folder = tmp_path_factory.mktemp("noise")
    rng = np.random.default_rng(0)
    for name, n in (("train", 200), ("val", 100)):
        np.savez(folder / f"{name}.npz", x=rng.normal(size=(n, 8)).astype("float32"),
                 y=rng.integers(0, 2, n))
    return folder


def _noise_args(noise, out, *more):
    return ("dataset=npz", f"dataset.path={noise / 'train.npz'}",
            f"dataset.val_path={noise / 'val.npz'}", "dataset.batch_size=20", QUIET,
            f"hydra.run.dir={out}", *more)


def _cross_entropy(run, x, y) -> tuple[float, float]:
    """Mean softmax cross-entropy and accuracy of the run's saved model.npz on ``(x, y)``,
    computed here with NumPy from the model's logits."""
    z = np.asarray(trainer_run.load_model(run).predict(x), dtype=np.float64)
    z -= z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-log_p[np.arange(len(y)), y].mean()), float((z.argmax(axis=1) == y).mean())


def test_fast_runs_three_iterations_one_evaluation_one_checkpoint(tmp_path):
    out = tmp_path / "fast"
    result = run_cli("dataset=mnist_like", "model=logistic_regression", "debug=fast", QUIET,
                     f"hydra.run.dir={out}")
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["iteration"], summary["status"]) == (3, "completed")
    rows = read_jsonl(out / "metrics.jsonl")
    assert [row["iteration"] for row in rows] == [1, 2, 3]
    assert [row["iteration"] for row in rows if "val/loss" in row] == [3]
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir()) == ["iter_00000003"]


def test_overfit_learns_one_batch(noise, tmp_path):
    out = tmp_path / "overfit"
    result = run_cli("debug=overfit", *_noise_args(noise, out))
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(out / "metrics.jsonl")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iteration"] == 500
    data = np.load(noise / "train.npz")
    loss, accuracy = _cross_entropy(out, data["x"][:20], data["y"][:20])
    assert loss < 0.05 * rows[0]["train/loss"]
    assert accuracy == 1.0
    # the validation split is that batch: the evaluator's numbers are the saved model's on it
    assert summary["val/loss"] == pytest.approx(loss, rel=1e-3)
    assert summary["val/accuracy"] == 1.0
    # and not the validation file, on which noise labels cannot be learned
    assert _cross_entropy(out, np.load(noise / "val.npz")["x"], np.load(noise / "val.npz")["y"])[0] > 0.5


def test_overfit_batches_takes_the_first_k_batches(noise, tmp_path):
    out = tmp_path / "two"
    result = run_cli(*_noise_args(noise, out, "dataset.overfit_batches=2",
                                  "trainer.max_iterations=4", "trainer.eval_interval=4"))
    assert result.returncode == 0, result.stderr
    data = np.load(noise / "train.npz")
    loss, accuracy = _cross_entropy(out, data["x"][:40], data["y"][:40])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["val/loss"] == pytest.approx(loss, rel=1e-4)
    assert summary["val/accuracy"] == pytest.approx(accuracy)
    assert summary["epoch"] == 2.0  # 4 batches of 20 over 40 examples


@pytest.mark.parametrize("value, words", [("11", "takes 11 batches of 20 examples; the training "
                                                  "split has 200"),
                                          ("0", "dataset.overfit_batches")])
def test_overfit_batches_refuses_what_it_cannot_take(noise, tmp_path, value, words):
    out = tmp_path / "refused"
    result = run_cli(*_noise_args(noise, out, f"dataset.overfit_batches={value}"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_unknown_debug_preset_lists_the_options(tmp_path):
    result = run_cli("debug=nosuch", QUIET, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: debug=nosuch")
    assert all(option in result.stderr for option in ("fast", "overfit", "profile"))


def _profiled(out, *args) -> tuple[dict, dict, str]:
    result = run_cli("debug=profile", "trainer.max_iterations=60", "trainer.eval_interval=20",
                     "trainer.checkpoint_interval=30", QUIET, f"hydra.run.dir={out}", *args)
    assert result.returncode == 0, result.stderr
    profile = json.loads((out / "profile.json").read_text())
    return profile, json.loads((out / "summary.json").read_text()), result.stdout


def _check_adds_up(profile: dict, summary: dict) -> dict:
    stages = {name: row["total_s"] for name, row in profile["stages"].items()}
    assert list(stages) == ["start-up", *STAGES, "other"]
    assert profile["iterations"] == summary["iteration"] == 60
    # the run's time is the job's, start-up included (summary.json's elapsed_s)
    assert sum(stages[name] for name in ("start-up", *STAGES)) == pytest.approx(
        summary["elapsed_s"], rel=0.1)
    assert stages["other"] < 0.1 * profile["session_s"]
    assert sum(stages.values()) == pytest.approx(profile["session_s"], rel=1e-9)
    assert stages["extensions"] >= sum(profile["extensions"].values()) - 1e-12
    assert {"evaluator", "snapshot", "log_report", "summary"} <= set(profile["extensions"])
    for name, row in profile["stages"].items():
        assert row["per_iteration_ms"] == (None if name == "start-up" else
                                           pytest.approx(1000 * row["total_s"] / 60))
        assert row["percent"] == pytest.approx(100 * row["total_s"] / profile["session_s"])
    return stages


def test_profile_stages_add_up_to_the_run(tmp_path):
    profile, summary, stdout = _profiled(tmp_path / "p")
    stages = _check_adds_up(profile, summary)
    assert all(stages[name] > 0 for name in STAGES if name != "communication")
    assert "communication" in profile["notes"]  # one replica, no kvstore: said in the table
    for word in ("start-up", *STAGES, "other", "profile:", "evaluator", "no kvstore"):
        assert word in stdout


def test_profile_with_replicas_accumulation_and_loss_scaling(tmp_path):
    profile, summary, stdout = _profiled(tmp_path / "p", "updater=parallel", "updater.devices=2",
                                         "kvstore=local", "updater.accum_grad=2",
                                         "loss_scale=dynamic")
    stages = _check_adds_up(profile, summary)
    assert all(stages[name] > 0 for name in STAGES)
    assert profile["notes"] == {}


def test_no_profile_without_the_preset(noise, tmp_path):
    out = tmp_path / "plain"
    result = run_cli(*_noise_args(noise, out, "trainer.max_iterations=2"))
    assert result.returncode == 0, result.stderr
    assert not (out / "profile.json").exists()
    assert "profile:" not in result.stdout


def test_overfit_resumes_bit_for_bit(noise, tmp_path):
    more = ("dataset.overfit_batches=2", "trainer.checkpoint_interval=3", "trainer.eval_interval=3")
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert run_cli(*_noise_args(noise, whole, *more, "trainer.max_iterations=6")).returncode == 0
    assert run_cli(*_noise_args(noise, cut, *more, "trainer.max_iterations=3")).returncode == 0
    result = run_cli(f"resume={cut}", "trainer.max_iterations=6", QUIET)
    assert result.returncode == 0, result.stderr
    expected, resumed = load_npz(whole / "model.npz"), load_npz(cut / "model.npz")
    assert expected.keys() == resumed.keys()
    assert all(np.array_equal(expected[k], resumed[k]) for k in expected)


def test_lr_find_prints_the_rate_and_its_command_and_writes_only_its_own_folder(tmp_path):
    result = run_cli("debug=lr_find", "dataset=spirals", "dataset.size=400",
                     "trainer.lr_find.num_training=30", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rate = re.search(r"^suggested learning rate: (\S+) \(step (\d+) of 30,", result.stdout, re.M)
    assert rate is not None, result.stdout
    assert (f"train with it: trainer-run dataset=spirals dataset.size=400 "
            f"optimizer.learning_rate={rate[1]}\n") in result.stdout
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == 2 and {p.name for p in written} == {"lr_find.json", "lr_find.png"}
    folder = tmp_path / written[0].parent
    assert re.fullmatch(r"lr_find/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d", str(written[0].parent))
    assert written[0].parts[1] in (time.strftime("%Y-%m-%d"), time.strftime("%Y-%m-%d", time.gmtime()))
    assert f"range test folder: {folder.resolve()} (lr_find.json, lr_find.png)" in result.stdout
    values = json.loads((folder / "lr_find.json").read_text())
    steps = values["steps"]
    average = 0.0  # Lightning's smoothing of the raw losses, step by step
    for k, step in enumerate(steps, start=1):
        average = 0.98 * average + 0.02 * step["loss"]
        assert step["smoothed_loss"] == pytest.approx(average / (1 - 0.98 ** (k + 1)), rel=1e-9)
    chosen = values["suggestion"]
    assert (f"{chosen['learning_rate']:.3g}", chosen["step"]) == (rate[1], int(rate[2]))
    assert steps[chosen["step"] - 1]["learning_rate"] == chosen["learning_rate"]


def test_lr_find_in_a_sweep_is_refused_before_anything_is_made(tmp_path, monkeypatch):
    from trainer_run.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        main.prepare(["-m", "debug=lr_find", "seed=1,2"])
    assert str(raised.value) == "debug=lr_find runs one range test: drop -m/--multirun"
    assert list(tmp_path.iterdir()) == []
