"""Weight averaging from the command line: trainer.ema_decay and trainer.swa write model_ema.npz
and model_swa.npz, log val/ema/ metrics at each evaluation, rank by them as the objective, and
report the SWA weights' val/swa/ metrics in summary.json; the run's ``metrics`` are measured
on the averaged weights too, as trainer-eval measures model_ema.npz; a damaged average in a
checkpoint is refused on resume in one line naming it."""

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli


def test_ema_and_swa_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    done = run_cli("trainer.max_iterations=20", "trainer.eval_interval=10",
                   "trainer.log_interval=10", "trainer.ema_decay=0.9", "trainer.swa.start=0.5",
                   "trainer.swa.interval=5", "objective.metric=val/ema/accuracy",
                   "objective.mode=max", "trainer.progress=false", f"hydra.run.dir={out}",
                   "metrics=[f1_macro]", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out / "metrics.jsonl")
    assert [row["iteration"] for row in rows if "val/ema/loss" in row] == [10, 20]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objective"]["metric"] == "val/ema/accuracy"
    assert summary["swa"] == {"averaged": 3, "bn_batches": 0}  # iterations 10, 15 and 20
    assert {"val/ema/accuracy", "val/swa/accuracy", "val/swa/loss"} <= set(summary)
    ema, swa, last = (load_npz(out / f"model{kind}.npz") for kind in ("_ema", "_swa", ""))
    assert ema.keys() == swa.keys() == last.keys()
    assert not np.array_equal(ema["l1/W"], last["l1/W"])
    assert summary["objective"]["best_iteration"] == 20  # the best weights are the last EMA's
    best = load_npz(out / "model_best.npz")
    assert all(np.array_equal(best[k], ema[k]) for k in ema)
    # the run's metrics are measured on the averaged weights too: trainer-eval of model_ema.npz
    # on the validation split (another path) gives the last row's val/ema/ values
    assert {"val/ema/f1_macro", "val/swa/f1_macro"} <= set(summary)
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", str(out),
                           f"checkpoint={out / 'model_ema.npz'}", "split=val"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(sorted((out / "eval").glob("*.json"))[-1].read_text())
    last = [row for row in rows if "val/ema/loss" in row][-1]   # the SWA row comes after it
    assert record["metrics"]["val/f1_macro"] == pytest.approx(last["val/ema/f1_macro"], rel=1e-9)
    assert record["metrics"]["val/loss"] == pytest.approx(last["val/ema/loss"], rel=1e-6)


def _command(module: str, *arguments, cwd) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", module, *map(str, arguments)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_the_averaged_weights_say_what_they_are_and_their_exports_keep_apart(tmp_path):
    """An EMA objective with a test split: the test line and summary.json say the best weights
    are the EMA's; trainer-eval and trainer-export of model_ema.npz print no ``iteration
    None``; the default exports of model_ema.npz and model_swa.npz are two files."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    np.savez(tmp_path / "train.npz", x=x[:240], y=y[:240])
    np.savez(tmp_path / "test.npz", x=x[240:], y=y[240:])
    out = tmp_path / "run"
    done = run_cli("dataset=npz", f"dataset.path={tmp_path / 'train.npz'}",
                   f"dataset.test_path={tmp_path / 'test.npz'}", "trainer.max_iterations=12",
                   "trainer.eval_interval=4", "trainer.log_interval=4", "trainer.ema_decay=0.9",
                   "objective.metric=val/ema/loss", "trainer.swa.start=0.5",
                   "trainer.swa.interval=2", "trainer.progress=false", f"hydra.run.dir={out}",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    best = summary["objective"]["best_iteration"]
    assert summary["test_weights"] == {"checkpoint": "best", "iteration": best, "averaged": "ema"}
    line = [line for line in done.stdout.splitlines() if "test/loss" in line][0]
    assert line.startswith(f"best EMA weights (iteration {best}): test/accuracy ")
    said = _command("trainer_run.cli.evaluate", out, "checkpoint=model_ema.npz", "split=val",
                    cwd=out).stdout.splitlines()[0]
    assert said == f"val split: 48 examples; file weights ({(out / 'model_ema.npz').resolve()})"
    written = {}
    for kind in ("ema", "swa"):
        said = _command("trainer_run.cli.export", out, f"checkpoint=model_{kind}.npz", cwd=out).stdout
        assert "None" not in said
        written[kind] = (out / said.split()[1]).resolve()
        assert said == f"written: {said.split()[1]} (file weights, model_{kind}.npz)\n"
    assert written["ema"] != written["swa"] and written["ema"].parent == out.resolve() / "export"
    for kind, path in written.items():
        with np.load(path) as exported:
            averaged = load_npz(out / f"model_{kind}.npz")
            assert np.array_equal(exported["l1/W"], averaged["l1/W"]), kind


def _damage(state: dict, how: str) -> str:
    """Damages the EMA or SWA state of a checkpoint's ``state`` as ``how`` says; the entry the
    refusal must name and what it must say of it."""
    extensions = state["trainer"]["extensions"]
    if how == "negative count":
        extensions["swa"]["count"] = -3
        return "trainer/extensions/swa/count is -3, not a number of averaged values (an integer " \
               "from 0 to 7)"
    if how == "huge count":
        extensions["swa"]["count"] = 1e30
        return "trainer/extensions/swa/count is 1e+30, not a number of averaged values (an " \
               "integer from 0 to 7)"
    if how == "missing":
        del extensions["ema"]
        return "trainer/extensions/ema is missing, though its config has trainer.ema_decay on"
    if how == "decay of 5":
        extensions["ema"]["decay"] = 5
        return "trainer/extensions/ema/decay is 5, not a number in [0, 1)"
    extensions["ema"]["params"]["l2/W"][...] = np.nan
    return "trainer/extensions/ema/params/l2/W holds values that are not finite (NaN or " \
           "infinite), though the parameter holds none"


@pytest.fixture(scope="module")
def averaged(tmp_path_factory):
    """A run with EMA and SWA (6 iterations, checkpoints at 3 and 6)."""
    from run_folders import make_run

    folder = tmp_path_factory.mktemp("averaged")
    return make_run(folder, folder / "keys", "trainer.ema_decay=0.9", "trainer.swa.start=2",
                    "trainer.swa.interval=1")


@pytest.mark.parametrize("how", ["negative count", "huge count", "missing", "decay of 5",
                                 "all NaN"])
def test_a_damaged_average_in_a_checkpoint_is_refused_on_resume_and_names_it(averaged, tmp_path,
                                                                            how):
    import shutil
    import subprocess
    import sys

    from run_folders import environment

    from trainer_run.storage import checkpoint

    run = shutil.copytree(averaged, tmp_path / "run", symlinks=True)
    found = checkpoint.find(run)
    state = checkpoint.load(found)
    named = _damage(state, how)
    checkpoint.save(state, found.parent, checkpoint.iteration_of(found))  # valid checksums
    before = _files(run)
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", f"resume={run}",
                           "trainer.max_iterations=9"], env=environment(averaged.parent / "keys"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: checkpoint {found} is damaged: its {named}; resume from an earlier one with "
        f"resume={run / 'checkpoints' / 'iter_00000003'}"]
    assert _files(run) == before  # nothing written


def _files(run) -> dict:
    """Each file's bytes and mtime, but the lock's (a resume takes it, then lets it go)."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.rglob("*")
            if p.is_file() and p.name != ".lock"}
