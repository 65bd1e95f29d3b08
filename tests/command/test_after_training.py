"""After training (issue 26 items 1, 2, 4): the test split is measured with the best
evaluation's weights and says so; ``load_model`` takes best, last or a path; ``trainer-eval``
measures a run on a split of its data or on another file; ``init_from`` starts a new run
from saved weights. Every figure is checked against one computed here from the weights in
the run's files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy
import pytest
from helpers import load_npz, run_cli

import trainer_run
from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint

QUIET = ("trainer.progress=false",)
TRAIN = ("dataset=npz", "dataset.path=train.npz", "dataset.test_path=test.npz",
         "trainer.max_iterations=200", "trainer.eval_interval=20", "trainer.keep_checkpoints=null",
         "trainer.log_interval=20", *QUIET)


def _files(folder: Path, classes: int = 2, seed: int = 0) -> None:
    rng = numpy.random.default_rng(seed)
    x = rng.normal(size=(600, 8)).astype(numpy.float32)
    y = numpy.digitize(x[:, 0] + 0.5 * rng.normal(size=600), [0.0] if classes == 2 else [-0.4, 0.4])
    numpy.savez(folder / "train.npz", x=x[:400], y=y[:400])
    numpy.savez(folder / "test.npz", x=x[400:], y=y[400:])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A run on train.npz with test.npz as its test split: its val/loss is best at an early
    evaluation and worse at the end (it overfits), so best and last differ."""
    folder = tmp_path_factory.mktemp("after").resolve()
    _files(folder)
    result = run_cli(*TRAIN, "hydra.run.dir=run", cwd=folder)
    assert result.returncode == 0, result.stderr
    summary = json.loads((folder / "run" / "summary.json").read_text())
    assert summary["objective"]["best_iteration"] < 200
    return folder


def _metrics(logits, y) -> dict:
    """Mean softmax cross-entropy and accuracy, in float64."""
    z = numpy.asarray(logits, numpy.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - numpy.log(numpy.exp(z).sum(axis=1, keepdims=True))
    return {"loss": -log_p[numpy.arange(len(y)), y].mean(), "accuracy": (z.argmax(1) == y).mean()}


def test_the_test_split_is_measured_with_the_best_weights_and_the_summary_says_which(trained):
    summary = json.loads((trained / "run" / "summary.json").read_text())
    best = summary["objective"]["best_iteration"]
    assert summary["test_weights"] == {"checkpoint": "best", "iteration": best}
    model = trainer_run.load_model(trained / "run", "best")
    with numpy.load(trained / "test.npz") as test:
        expected = _metrics(model.predict(test["x"]), test["y"])
    assert summary["test/loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert summary["test/accuracy"] == pytest.approx(expected["accuracy"])
    final = load_npz(trained / "run" / "checkpoints" / "iter_00000200" / "arrays.npz")
    saved = load_npz(trained / "run" / "model.npz")  # model.npz keeps the final weights
    assert numpy.array_equal(saved["l1/W"], final["trainer/updater/models/main/l1/W"])


def test_load_model_takes_best_last_or_a_path_and_defaults_to_best(trained, monkeypatch):
    monkeypatch.chdir(trained)
    run = Path("run")
    best = json.loads((run / "summary.json").read_text())["objective"]["best_iteration"]
    named = run / "checkpoints" / checkpoint.name_of(best)
    default = trainer_run.load_model(run)
    assert (default.weights.which, default.weights.iteration) == ("best", best)
    last = trainer_run.load_model(run, "last")
    assert last.weights.path == run / "model.npz"
    for source in (run / "checkpoints" / "best", named, "checkpoints/best"):  # the last: in the run
        loaded = trainer_run.load_model(run, str(source))
        assert loaded.weights.path == named and loaded.weights.iteration == best
    expected = load_npz(run / "model_best.npz")
    for model, arrays in ((default, expected), (last, load_npz(run / "model.npz"))):
        for path, param in model.model.params().items():
            assert numpy.array_equal(param.data, arrays[path]), path
    assert not numpy.array_equal(expected["l1/W"], load_npz(run / "model.npz")["l1/W"])


def test_a_run_that_did_not_complete_loads_with_a_warning_naming_how_it_ended(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained / "run", run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "diverged"}))
    with pytest.warns(UserWarning, match=r"ended with status diverged at iteration 200; its "
                                         r"weights are those it had then"):
        trainer_run.load_model(run, "last")
    for name in ("summary.json", "model.npz", "model_best.npz"):  # killed: checkpoints only
        (run / name).unlink()
    shutil.rmtree(run / "checkpoints" / checkpoint.name_of(summary["objective"]["best_iteration"]))
    (run / "checkpoints" / "best").unlink()
    with pytest.warns(UserWarning, match="has no summary.json: it was killed or is still running"):
        loaded = trainer_run.load_model(run)
    assert (loaded.weights.which, loaded.weights.iteration) == ("last", 200)
    with pytest.raises(ConfigError, match="has no best checkpoint"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer_run.load_model(run, "best")


def _eval(folder: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", *map(str, args)],
                          cwd=folder, capture_output=True, text=True, timeout=120)


def test_trainer_eval_measures_the_test_split_the_validation_split_and_another_file(trained):
    summary = json.loads((trained / "run" / "summary.json").read_text())
    before = sorted(p.name for p in (trained / "run").iterdir())
    done = _eval(trained, "run")
    assert done.returncode == 0, done.stderr
    written = sorted((trained / "run" / "eval").glob("*.json"))
    record = json.loads(written[-1].read_text())
    assert record["metrics"]["test/loss"] == pytest.approx(summary["test/loss"], rel=1e-6)
    assert record["checkpoint"]["checkpoint"] == "best" and record["examples"] == 200
    assert f"written: run/eval/{written[-1].name}" in done.stdout
    # the run's validation split, drawn with its seed: the objective's best value again
    done = _eval(trained, "run", "split=val")
    assert done.returncode == 0, done.stderr
    record = json.loads(sorted((trained / "run" / "eval").glob("*.json"))[-1].read_text())
    assert record["metrics"]["val/loss"] == pytest.approx(summary["objective"]["best"], rel=1e-6)
    # another file, every example, the last weights: computed here from model.npz
    done = _eval(trained, "run", "dataset.path=test.npz", "dataset.test_path=null", "split=all",
                 "checkpoint=last")
    assert done.returncode == 0, done.stderr
    record = json.loads(sorted((trained / "run" / "eval").glob("*.json"))[-1].read_text())
    with numpy.load(trained / "test.npz") as test:
        expected = _metrics(trainer_run.load_model(trained / "run", "last").predict(test["x"]),
                            test["y"])
    assert record["metrics"]["all/loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert record["metrics"]["all/accuracy"] == pytest.approx(expected["accuracy"])
    after = sorted(p.name for p in (trained / "run").iterdir())
    assert sorted({*after} - {*before}) == (["eval"] if "eval" not in before else [])


@pytest.mark.parametrize("args, message", [
    (("split=nope",), "error: split=nope is unknown; choose one of test, val, train, all"),
    (("checkpoint=nowhere",), "error: checkpoint=nowhere is neither best nor last, and no "
                              "checkpoint or .npz file is there (run/nowhere)"),
    (("dataset=nosuch",), "error: dataset=nosuch is not available; choose one of "),
    (("datset.path=x",), "error: 'datset.path=x' is not a KEY=VALUE this command takes"),
    (("dataset=spirals",), "error: the data of dataset._target_=trainer_run.data.spirals has no "
                           "test split"),
    (("dataset=spirals", "split=all"), "error: the all split's examples have shape (2,); the "
                                       "run's model takes (8,)"),
])
def test_trainer_eval_bad_input_is_one_line(trained, args, message):
    done = _eval(trained, "run", *args)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(message), done.stderr


def test_init_from_with_a_zero_learning_rate_carries_the_weights_bit_for_bit(trained, tmp_path):
    _files(tmp_path)
    done = run_cli(*TRAIN, f"init_from={trained / 'run'}", "optimizer.learning_rate=0",
                   "trainer.max_iterations=20", "hydra.run.dir=tuned", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    source = load_npz(trained / "run" / "model_best.npz")
    tuned = load_npz(tmp_path / "tuned" / "model.npz")
    assert sorted(tuned) == sorted(source)
    assert all(numpy.array_equal(tuned[k], source[k]) for k in source)
    summary = json.loads((tmp_path / "tuned" / "summary.json").read_text())
    best = json.loads((trained / "run" / "summary.json").read_text())["objective"]["best_iteration"]
    assert summary["init_from"] == {
        "checkpoint": "best", "iteration": best, "loaded": len(source), "not_loaded": [],
        "path": str(trained / "run" / "checkpoints" / checkpoint.name_of(best))}
    # resuming the fine-tuned run resumes it, and init_from may not change on a resume
    again = run_cli("resume=tuned", "trainer.max_iterations=30", *QUIET, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "tuned" / "summary.json").read_text())["iteration"] == 30
    refused = run_cli("resume=tuned", "init_from=elsewhere", *QUIET, cwd=tmp_path)
    assert refused.returncode == 2 and "init_from" in refused.stderr, refused.stderr


def test_init_from_a_model_with_a_new_head_is_strict_unless_told(trained, tmp_path):
    """Three classes instead of two: the output layer l3 differs; strict refuses naming it,
    init_from_strict=false loads l1 and l2 and lists l3."""
    _files(tmp_path, classes=3)
    common = (*TRAIN, f"init_from={trained / 'run' / 'model.npz'}", "trainer.max_iterations=5")
    refused = run_cli(*common, "hydra.run.dir=strict", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().startswith(
        f"error: init_from={trained / 'run' / 'model.npz'}: the weights do not match the model: "
        "l3/W of shape (2, 64), the model's (3, 64); l3/b of shape (2,), the model's (3,)")
    assert not (tmp_path / "strict").exists()
    loose = run_cli(*common, "init_from_strict=false", "optimizer.learning_rate=0",
                    "hydra.run.dir=loose", cwd=tmp_path)
    assert loose.returncode == 0, loose.stderr
    assert "warning: init_from: not loaded: l3/W of shape (2, 64), the model's (3, 64)" in loose.stderr
    source, tuned = load_npz(trained / "run" / "model.npz"), load_npz(tmp_path / "loose" / "model.npz")
    assert all(numpy.array_equal(tuned[k], source[k]) for k in ("l1/W", "l1/b", "l2/W", "l2/b"))
    assert tuned["l3/W"].shape == (3, 64)


def test_trainer_eval_of_another_users_run_naming_code_needs_trust(tmp_path):
    """A run whose model is the user's own code, signed by alice: bob's trainer-eval refuses it
    in one line naming the target and trust=true, and evaluates it with trust=true."""
    import os

    _files(tmp_path)
    (tmp_path / "tiny_models.py").write_text(
        "from trainer_run.models import MLP\n\n\nclass Tiny(MLP):\n    pass\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "alice"), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", *TRAIN, "trainer.max_iterations=20",
                           "+model._target_=tiny_models.Tiny", "hydra.run.dir=run"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    bob = {**env, "XDG_CONFIG_HOME": str(tmp_path / "bob")}
    refused = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", "run"], cwd=tmp_path,
                             env=bob, capture_output=True, text=True, timeout=120)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "tiny_models.Tiny" in lines[0] and "trust=true" in lines[0]
    assert not (tmp_path / "run" / "eval").exists()
    trusted = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", "run", "trust=true"],
                             cwd=tmp_path, env=bob, capture_output=True, text=True, timeout=120)
    assert trusted.returncode == 2  # trust admits alice's code, not her choice of a file of bob's
    assert trusted.stderr == ("error: run run is not signed by you and its dataset.path=train.npz "
                              "and dataset.test_path=test.npz name files outside the run, so "
                              "trainer-run does not read them on the run's word; give them "
                              "yourself (dataset.path=<file> dataset.test_path=<file> on the "
                              "command line) to use them\n")
    trusted = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", "run", "trust=true",
                              "dataset.path=train.npz", "dataset.test_path=test.npz"], cwd=tmp_path, env=bob,
                             capture_output=True, text=True, timeout=120)
    assert trusted.returncode == 0, trusted.stderr
    assert len(list((tmp_path / "run" / "eval").glob("*.json"))) == 1


AT_ONCE = 8
TOGETHER = """
import datetime, os, sys
import trainer_run, trainer_run.runner.trained, trainer_run.metrics, rich.table  # imported once, forked
from trainer_run.cli import evaluate
from trainer_run.runner import evaluation
count, run = int(sys.argv[1]), sys.argv[2]
write, ready, go = evaluation.write, os.pipe(), os.pipe()

def together(run_dir, result):  # every process writes its record at the same moment
    os.write(ready[1], b"r")
    os.read(go[0], 1)
    return write(run_dir, result)

class Now(datetime.datetime):  # and in the same microsecond
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 12, 7, 15, 0, 0, 123456)

evaluation.write, evaluation.datetime = together, Now
children = []
for index in range(count):
    pid = os.fork()
    if pid == 0:
        try:
            evaluate.main([run, "split=" + ("val", "train")[index % 2]])
        except SystemExit as e:
            sys.stdout.flush()
            os._exit(e.code or 0)
        os._exit(1)
    children.append(pid)
for _ in range(count):
    os.read(ready[0], 1)
os.write(go[1], b"g" * count)
sys.exit(max(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))
"""


def test_evaluations_at_once_each_keep_their_own_complete_record(tmp_path):
    from run_folders import environment, make_run

    run = make_run(tmp_path, tmp_path / "keys")
    done = subprocess.run([sys.executable, "-c", TOGETHER, str(AT_ONCE), str(run)], cwd=tmp_path,
                          env=environment(tmp_path / "keys"), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    records = sorted((run / "eval").iterdir())
    names = ["2026-12-07_15-00-00_123456.json",
             *(f"2026-12-07_15-00-00_123456_{n}.json" for n in range(2, AT_ONCE + 1))]
    assert sorted(p.name for p in records) == sorted(names)  # nothing else: no temporary
    written = re.findall(r"written: (\S+?\.json)", done.stdout)  # the processes' lines mix
    assert sorted(written) == [str(p) for p in records], done.stdout  # each names its own
    splits = sorted(json.loads(p.read_text())["split"] for p in records)  # each complete JSON
    assert splits == ["train"] * (AT_ONCE // 2) + ["val"] * (AT_ONCE // 2)


def test_trainer_eval_writes_the_record_the_library_gives(tmp_path, monkeypatch):
    from run_folders import command, make_run

    from trainer_run.runner import evaluation

    run = make_run(tmp_path, tmp_path / "keys")
    done = command("trainer-eval", run, "split=val", "checkpoint=last", keys=tmp_path / "keys",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [written] = sorted((run / "eval").iterdir())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "keys"))
    assert evaluation.evaluate(run, ["split=val", "checkpoint=last"]) == json.loads(written.read_text())
    assert sorted((run / "eval").iterdir()) == [written]
