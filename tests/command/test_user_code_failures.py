"""An error in the user's code (a callback, a logger, the model, a loader, an
``updater.callbacks`` hook) names that object by its config key and class, says which
checkpoint is kept and how to resume, and exits 1, whatever it raised (an ``OSError`` is never
a full disk: exit 4 is for our own writes); a callback's state a checkpoint cannot hold names
the callback and leaves the previous checkpoints and no temporary folder; a logger whose
``close`` fails after training does not fail the run; a model whose loss is no graph node is
told what to return; a run stopped early says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
from helpers import run_cli

from trainer_run.storage import checkpoint

QUICK = ("trainer.progress=false", "trainer.max_iterations=12", "trainer.log_interval=3",
         "trainer.eval_interval=3", "trainer.checkpoint_interval=3")

MINE = '''
import os
import sys
import numpy
from trainer_run import functions as F
from trainer_run.models import Linear, Module

def late(trainer):
    return trainer.updater.iteration >= 5

class Reads:                          # a callback that fails to read a file of its own
    def __call__(self, trainer):
        if late(trainer):
            open("/nonexistent/thresholds.txt").read()

class Exits:                          # a callback that calls sys.exit
    def __init__(self, code=0):
        self.code = code
    def __call__(self, trainer):
        if late(trainer):
            sys.exit(self.code)

class BadState:                       # a state no checkpoint can hold, from iteration 5 on
    def __init__(self):
        self.seen = 0
    def __call__(self, trainer):
        self.seen = trainer.updater.iteration
    def state_dict(self):
        return {"seen": self.seen, "extra": [1, {"when": object()}] if self.seen >= 5 else []}
    def load_state_dict(self, state):
        self.seen = state["seen"]

class Refused:                        # a logger whose server refuses the connection
    def start(self, out, rows): pass
    def write(self, row): raise ConnectionRefusedError(111, "Connection refused")
    def close(self): pass

class Unreachable(Refused):           # refused at start
    def start(self, out, rows): raise PermissionError(13, "Permission denied", "/srv/board")

class ClosesBadly(Refused):           # training completes; closing fails
    def write(self, row): pass
    def close(self): raise self.error

class ClosesWithRuntimeError(ClosesBadly):
    error = RuntimeError("the board went away")

class ClosesWithOSError(ClosesBadly):
    error = BrokenPipeError(32, "Broken pipe")

def hook(iteration):                  # an updater.callbacks hook
    if iteration >= 5:
        raise TimeoutError("the hook's server timed out")

def loader():                         # a loader that downloads, offline
    raise ConnectionRefusedError(111, "Connection refused")

class Late:                           # a Python dataset that fails once training reads it
    def __init__(self, n, fails="raise"):
        self.n, self.reads, self.fails = n, 0, fails
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        self.reads += 1               # the run reads every label once before training
        late = self.reads > self.n + 40
        if late and self.fails == "raise":
            raise KeyError(f"example {i} is gone")
        rng = numpy.random.default_rng(int(i))
        side = 5 if late and self.fails == "shape" else 6
        return rng.normal(size=(1, side, 6)).astype(numpy.float32), numpy.int64(i % 4)

def late_pair(fails="raise"):
    return Late(200, fails), Late(40)

class Flaky(Late):                    # fine in training, raises when evaluated with BREAK set
    def __getitem__(self, i):
        if os.environ.get("BREAK") and i == 7:
            raise KeyError(f"example {i} is gone")
        return super().__getitem__(i)

def flaky_pair():
    return Flaky(200, None), Flaky(40, None)

class Net(Module):
    def __init__(self, in_size, out_size, backend, returns="variable"):
        self.fc = Linear(in_size, out_size, backend)
        self.returns = returns
    def forward(self, x):
        return self.fc(x)
    def __call__(self, x, t):
        loss = F.softmax_cross_entropy(self.forward(x), t)
        if self.returns == "float":
            return float(loss.data)
        if self.returns == "array":
            return loss.data
        if self.returns == "dict of float":
            return {"loss": float(loss.data), "accuracy": F.accuracy(self.forward(x), t)}
        if self.returns == "dict without loss":
            return {"accuracy": F.accuracy(self.forward(x), t)}
        if self.returns == "oserror":
            raise FileNotFoundError(2, "No such file or directory", "/data/extra.npy")
        return loss
'''


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "mine.py").write_text(MINE)
    return tmp_path


def trainer_run(folder: Path, *args):
    return run_cli(*QUICK, *args, cwd=folder)


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def error_line(done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("args, named, raised", [
    (("+callbacks.thresholds._target_=mine.Reads",), "callbacks.thresholds (mine.Reads)",
     "FileNotFoundError"),
    (("+logger.board._target_=mine.Refused",), "logger.board (mine.Refused).write()",
     "ConnectionRefusedError"),
    (("+logger.board._target_=mine.Unreachable",), "logger.board (mine.Unreachable).start()",
     "PermissionError"),
    (("+model._target_=mine.Net", "+model.returns=oserror"), "model (mine.Net)",
     "FileNotFoundError"),
    (("+updater.callbacks.update_on_start=mine.hook",),
     "updater.callbacks.update_on_start (mine.hook)", "TimeoutError"),
], ids=["callback", "logger-write", "logger-start", "model", "hook"])
def test_an_oserror_of_the_users_code_names_it_and_is_no_full_disk(folder, args, named, raised):
    run = folder / "run"
    done = trainer_run(folder, *args, f"hydra.run.dir={run}")
    line = error_line(done)
    assert done.returncode == 1, done.stderr
    assert line.startswith(f"error: {named} raised {raised}"), line
    assert "free some space" not in done.stderr and "cannot write" not in done.stderr
    assert f"resume={run}" in line or line.endswith("nothing was trained")  # failed once built
    if (run / "summary.json").exists():  # not for a failure at start, before training
        assert summary(run)["status"] == "failed"
    if (run / "checkpoints").is_dir():  # the last good checkpoint is the one the line names
        assert str(checkpoint.find(run)) in line
    assert "Traceback" in done.stderr and "mine.py" in done.stderr  # the user's code, to read


def test_a_loader_that_cannot_connect_names_the_loader(folder):
    run = folder / "run"
    done = trainer_run(folder, "+dataset._target_=mine.loader", f"hydra.run.dir={run}")
    assert done.returncode == 1, done.stderr
    line = error_line(done)
    assert line.startswith("error: dataset (mine.loader) raised ConnectionRefusedError"), line
    assert "cannot read" not in line and not run.exists()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("fails", ["raise", "shape"])
def test_a_python_datasets_failure_names_it_with_or_without_worker_processes(folder, fails, workers):
    run = folder / "run"
    done = trainer_run(folder, "+dataset._target_=mine.late_pair", f"+dataset.fails={fails}",
                       "dataset.batch_size=16", "model.hidden_sizes=[8]",
                       f"dataset.workers={workers}", f"hydra.run.dir={run}")
    assert done.returncode == 1, done.stderr
    line = error_line(done)
    assert line == done.stderr.strip().splitlines()[-1], done.stderr  # the last line
    if fails == "raise":
        assert line.startswith("error: dataset (mine.Late) raised KeyError: 'example "), line
        assert "Traceback" in done.stderr and "mine.py" in done.stderr  # the user's code, to read
        assert "in __getitem__" in done.stderr and "/trainer_run/" not in done.stderr  # only it
    else:
        assert line.startswith("error: dataset (mine.Late).__getitem__() returned example "), line
        assert ("of another shape than the first: parts of shapes (1, 5, 6), () where the first "
                "has parts of shapes (1, 6, 6), ()") in line
        assert "Traceback" not in done.stderr
    assert f"resume={run}" in line and summary(run)["status"] == "failed"


def test_trainer_eval_of_a_dataset_that_raises_names_it(folder):
    run = folder / "run"
    trained = trainer_run(folder, "+dataset._target_=mine.flaky_pair", "model.hidden_sizes=[8]",
                          f"hydra.run.dir={run}")
    assert trained.returncode == 0, trained.stderr
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", str(run), "split=val"],
                          cwd=folder, env={**os.environ, "BREAK": "1"}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("error: dataset (mine.Flaky) raised KeyError: "
                                                    "'example 7 is gone'; nothing was evaluated")
    assert "mine.py" in done.stderr and "/trainer_run/" not in done.stderr  # the user's traceback
    assert not (run / "eval").exists()


@pytest.mark.parametrize("code", [0, None, "done"])
def test_a_callbacks_system_exit_is_an_error_of_its_code(folder, code):
    run = folder / "run"
    done = trainer_run(folder, "+callbacks.quit._target_=mine.Exits",
                       f"+callbacks.quit.code={json.dumps(code)}", f"hydra.run.dir={run}")
    assert (done.returncode, summary(run)["status"]) == (1, "failed"), done.stderr
    assert error_line(done).startswith(f"error: callbacks.quit (mine.Exits) raised "
                                       f"SystemExit({code!r})")


def test_a_callback_state_no_checkpoint_can_hold_names_it_and_keeps_the_previous(folder):
    run = folder / "run"
    done = trainer_run(folder, "+callbacks.keeper._target_=mine.BadState", f"hydra.run.dir={run}")
    assert done.returncode == 1, done.stderr
    line = error_line(done)
    assert line.startswith("error: callbacks.keeper (mine.BadState).state_dict() returned a value "
                           "a checkpoint cannot hold at /extra/1/when (a value of type object)"), line
    folder_names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert folder_names == ["best", "iter_00000003", "latest"]  # the previous one, nothing half-written
    assert "iter_00000003" in line and f"resume={run}" in line
    assert checkpoint.load(run / "checkpoints" / "iter_00000003")["trainer"]["extensions"][
        "keeper"] == {"seen": 3, "extra": []}


def test_a_checkpoint_that_cannot_be_written_leaves_no_temporary_folder(tmp_path):
    with pytest.raises(TypeError):
        checkpoint.save({"trainer": {"x": {1, 2}}}, tmp_path, 3)
    assert list(tmp_path.iterdir()) == []
    checkpoint.save({"trainer": {"x": 1}}, tmp_path, 3)
    with pytest.raises(TypeError):
        checkpoint.save({"trainer": {"x": numpy.datetime64("2026-01-01")}}, tmp_path, 6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_00000003", "latest"]


@pytest.mark.parametrize("logger", ["ClosesWithRuntimeError", "ClosesWithOSError"])
def test_a_logger_that_fails_to_close_after_training_leaves_the_run_complete(folder, logger):
    run = folder / "run"
    done = trainer_run(folder, f"+logger.board._target_=mine.{logger}", f"hydra.run.dir={run}")
    assert done.returncode == 0, done.stderr
    assert (summary(run)["status"], summary(run)["iteration"]) == ("completed", 12)
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and warning[0].startswith(
        f"warning: logger.board (mine.{logger}).close() raised "), done.stderr
    assert "error:" not in done.stderr and (run / "metrics.jsonl").is_file()


@pytest.mark.parametrize("returns, given", [
    ("float", "a float as its loss"), ("array", "a float32 as its loss"),
    ("dict of float", "a float as its loss"), ("dict without loss", "no 'loss'")])
def test_a_model_whose_loss_is_no_graph_node_is_told_what_to_return(folder, returns, given):
    run = folder / "run"
    done = trainer_run(folder, "+model._target_=mine.Net", f"+model.returns='{returns}'",
                       f"hydra.run.dir={run}")
    assert done.returncode == 1, done.stderr
    line = error_line(done)
    assert line.startswith(f"error: model (mine.Net).__call__() returned {given}; in training it "
                           "must return the loss as a trainer_run.autograd.Variable"), line
    assert "Traceback" not in done.stderr  # one line: nothing of ours to read


def test_a_callbacks_stop_says_why_and_the_summary_keeps_it(folder):
    (folder / "stops.py").write_text(
        "def at_7(trainer):\n"
        "    if trainer.updater.iteration == 7:\n"
        "        trainer.request_stop('loss below 0.5')\n")
    run = folder / "run"
    done = trainer_run(folder, "+callbacks.enough._target_=stops.at_7",
                       "+callbacks.enough._partial_=true", f"hydra.run.dir={run}")
    assert done.returncode == 0, done.stderr
    assert "stopped early after iteration 7 (epoch 0.22), before trainer.max_iterations=12: a " \
           "callback asked to stop (loss below 0.5)" in done.stdout
    assert (summary(run)["status"], summary(run)["stop_reason"]) == ("completed", "loss below 0.5")


def test_early_stopping_says_why_and_the_summary_keeps_it(tmp_path):
    run = tmp_path / "run"
    done = run_cli("trainer.progress=false", "trainer.max_iterations=2000", "trainer.eval_interval=10",
                   "trainer.early_stopping.patience=2", "optimizer.learning_rate=0.5",
                   f"hydra.run.dir={run}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = summary(run)
    assert (result["status"], result["stop_reason"]) == ("completed", "early_stopping")
    assert result["iteration"] < 2000
    goal = result["objective"]
    assert (f"stopped early after iteration {result['iteration']} (epoch {result['epoch']:.2f}), "
            "before trainer.max_iterations=2000: early stopping, val/loss did not improve by more "
            "than trainer.early_stopping.min_delta=0 in trainer.early_stopping.patience=2 "
            f"evaluations in a row; best val/loss {goal['best']:.6g} at iteration "
            f"{goal['best_iteration']}") in done.stdout


def test_a_run_to_its_limit_says_nothing_of_stopping_early(tmp_path):
    done = run_cli(*QUICK, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert done.returncode == 0 and "stopped early" not in done.stdout
