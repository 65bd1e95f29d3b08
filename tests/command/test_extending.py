"""A user's logger and callback, from a fresh folder with its own module, as docs/extending.md
shows them: the logger sees every row exactly once across an interrupted and resumed run; the
callback stops the run where it chooses and its state survives a resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import read_jsonl

MY_EXTENSIONS = '''
import json
import os
import signal
from pathlib import Path


class Recorder:
    """A logger in the shape of a W&B or MLflow client: every row to one file of its own."""

    def __init__(self, name="mine.jsonl", run=None):
        self.name = name
        self.metric = run.objective.metric if run is not None else None

    def start(self, out, rows):
        self.path = Path(out) / self.name
        self.path.write_text("".join(json.dumps(row) + "\\n" for row in rows))

    def write(self, row):
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\\n")

    def close(self):
        with self.path.open("a") as f:
            f.write(json.dumps({"closed": self.metric}) + "\\n")


class StopAt:
    """Ends the run after `iteration`; counts its calls (kept in checkpoints)."""

    def __init__(self, iteration):
        self.iteration = iteration
        self.calls = 0

    def __call__(self, trainer):
        self.calls += 1
        if trainer.updater.iteration >= self.iteration:
            trainer.request_stop(f"stopped by StopAt at {trainer.updater.iteration}")

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = state["calls"]


class Every4:
    """A callback with a trigger and the hooks around the run, each recorded."""

    trigger = (4, "iteration")

    def __init__(self):
        self.seen = []

    def initialize(self, trainer):
        self.seen.append("initialize")

    def __call__(self, trainer):
        self.seen.append(trainer.updater.iteration)

    def finalize(self, trainer):
        self.seen.append("finalize")
        Path(trainer.out, "every4.json").write_text(json.dumps(self.seen))


def interrupt(trainer):
    """A plain function: Ctrl-C at iteration 15."""
    if trainer.updater.iteration == 15:
        os.kill(os.getpid(), signal.SIGINT)
'''
QUICK = ("trainer.log_interval=5", "trainer.eval_interval=10", "trainer.checkpoint_interval=10",
         "trainer.progress=false", "dataset.size=400")


def user(folder: Path, *arguments, code=0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_CONFIG_HOME"] = str(folder / "keys")
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, arguments)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    return done


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "my_extensions.py").write_text(MY_EXTENSIONS)
    (tmp_path / "conf" / "logger").mkdir(parents=True)
    (tmp_path / "conf" / "logger" / "mine.yaml").write_text(
        "mine:\n  _target_: my_extensions.Recorder\n  name: mine.jsonl\n")
    return tmp_path


def test_a_user_logger_sees_every_row_once_across_an_interrupted_and_resumed_run(folder):
    run = folder / "run"
    user(folder, "--config-dir", "conf", "logger=[jsonl,mine]", *QUICK, "trainer.max_iterations=30",
         "+callbacks.ctrl_c._target_=my_extensions.interrupt", "+callbacks.ctrl_c._partial_=true",
         f"hydra.run.dir={run}", code=130)
    assert [json.loads(line) for line in (run / "mine.jsonl").read_text().splitlines()][-1] == \
        {"closed": "val/loss"}
    user(folder, f"resume={run}", "~callbacks.ctrl_c")
    mine = [json.loads(line) for line in (run / "mine.jsonl").read_text().splitlines()]
    assert mine[-1] == {"closed": "val/loss"}
    rows = read_jsonl(run / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [5, 10, 15, 20, 25, 30]
    assert mine[:-1] == json.loads(json.dumps(rows))  # the same rows, each once


def test_a_user_callback_stops_the_run_where_it_chooses_and_resumes_with_its_state(folder):
    run = folder / "run"
    done = user(folder, *QUICK, "+callbacks.stop._target_=my_extensions.StopAt",
                "+callbacks.stop.iteration=17", f"hydra.run.dir={run}")
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["iteration"], summary["status"], summary["stop_reason"]) == \
        (17, "completed", "stopped by StopAt at 17")
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_00000017"
    assert read_jsonl(run / "metrics.jsonl")[-1]["iteration"] == 17  # the log's last row too
    assert "interrupted" not in done.stdout
    # the user's own run resumes with no prompt; the callback goes on counting from 17 calls
    user(folder, f"resume={run}", "callbacks.stop.iteration=23")
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["iteration"], summary["stop_reason"]) == (23, "stopped by StopAt at 23")
    from trainer_run.storage import checkpoint

    state = checkpoint.load(checkpoint.find(run))
    assert state["trainer"]["extensions"]["stop"] == {"calls": 23}


def test_two_plain_function_callbacks_run_side_by_side(folder):
    (folder / "two.py").write_text(
        "from pathlib import Path\n\n"
        "def first(trainer):\n    Path(trainer.out, 'first').write_text(str(trainer.updater.iteration))\n\n"
        "def second(trainer):\n    Path(trainer.out, 'second').write_text(str(trainer.updater.iteration))\n")
    run = folder / "run"
    user(folder, *QUICK, "trainer.max_iterations=7", "+callbacks.a._target_=two.first",
         "+callbacks.a._partial_=true", "+callbacks.b._target_=two.second",
         "+callbacks.b._partial_=true", f"hydra.run.dir={run}")
    assert (run / "first").read_text() == (run / "second").read_text() == "7"


def test_a_callbacks_trigger_and_hooks_are_honoured(folder):
    run = folder / "run"
    user(folder, *QUICK, "trainer.max_iterations=12", "+callbacks.every4._target_=my_extensions.Every4",
         f"hydra.run.dir={run}")
    assert json.loads((run / "every4.json").read_text()) == ["initialize", 4, 8, 12, "finalize"]


def test_a_callback_may_not_take_the_name_of_one_of_ours(folder):
    done = user(folder, *QUICK, "+callbacks.objective._target_=my_extensions.Every4",
                "hydra.run.dir=run", code=2)
    assert done.stderr.strip().startswith("error: callbacks.objective: objective is the name of one "
                                          "of trainer-run's own extensions")
    assert not (folder / "run").exists()


def test_a_signal_during_the_last_writes_is_said_and_the_run_is_complete(folder):
    """A callback's finalize (the first of the run's end) sends SIGINT: the other extensions
    still write the checkpoint and the summary, the command says the signal came late and
    exits 0 as for a complete run."""
    (folder / "late.py").write_text(
        "import os, signal\n\nclass Late:\n    def __call__(self, trainer):\n        pass\n\n"
        "    def finalize(self, trainer):\n        os.kill(os.getpid(), signal.SIGINT)\n")
    run = folder / "run"
    done = user(folder, *QUICK, "trainer.max_iterations=10", "+callbacks.late._target_=late.Late",
                f"hydra.run.dir={run}")
    assert done.stderr.splitlines() == [
        "warning: SIGINT came while the run was writing its last files; they are complete and so "
        "is the run, nothing was cut short"]
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["iteration"]) == ("completed", 10)
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_00000010"
