"""The Python API (trainer_run.train / trainer_run.resume, runner/python_api.py): what one call
cannot do as asked is one line and nothing is made; an interrupted run from Python says how to
resume it from Python (the API against the command, to the bit: tests/command/test_python_api.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import trainer_run
from trainer_run.errors import JobFailed
from trainer_run.runner.python_api import Run


def python(code: str, cwd) -> subprocess.CompletedProcess:
    """Runs ``code`` in a plain Python process (no pytest, no command)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("overrides, run_dir, line", [
    (["-m", "seed=1,2"], None, "trainer_run.train runs one run and takes no -m: run a sweep with "
                               "the command (trainer-run -m ...), or call train once for each "
                               "setting"),
    (["--multirun", "seed=1"], None, "trainer_run.train runs one run and takes no --multirun: run "
                                     "a sweep with the command (trainer-run -m ...), or call "
                                     "train once for each setting"),
    (["--cfg", "job"], None, "trainer_run.train takes overrides (key=value), not the command's "
                             "flag --cfg; give a config folder as config_dir=, the run's folder "
                             "as run_dir="),
    (["hydra.run.dir=A"], "B", "run_dir='B' and hydra.run.dir=A both name the run's folder; give "
                               "one of them"),
])
def test_what_one_call_cannot_do_as_asked_is_one_line_and_nothing_is_made(tmp_path, monkeypatch,
                                                                          overrides, run_dir, line):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JobFailed) as raised:
        trainer_run.train(overrides, run_dir=run_dir)
    assert (str(raised.value), raised.value.exit_code) == (line, 2)
    assert sorted(tmp_path.iterdir()) == []


STOPPER = '''
import os
import signal


class Stopper:
    """Sends this process SIGINT (Ctrl-C) after the second iteration."""

    def __call__(self, trainer):
        if trainer.updater.iteration == 2:
            os.kill(os.getpid(), signal.SIGINT)
'''


def test_an_interrupted_run_from_python_says_how_to_resume_it_from_python(tmp_path):
    (tmp_path / "stopper.py").write_text(STOPPER)
    run = tmp_path / "run"
    done = python(f"""
        import trainer_run
        run = trainer_run.train(["+callbacks.stop._target_=stopper.Stopper", "dataset.size=120",
                                 "trainer.max_iterations=50", "trainer.progress=false"],
                                run_dir={str(run)!r})
        print(run.status)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-3:] == [f"interrupted at iteration 2; checkpoint {run / 'checkpoints' / 'iter_00000002'}",
                          f"resume with: trainer_run.resume({str(run)!r})", "interrupted"]
    for load in (trainer_run.load_model, Run(run).load_model):
        with pytest.warns(UserWarning) as told:
            load(run, "last") if load is trainer_run.load_model else load("last")
        assert [w.filename for w in told] == [__file__]  # the caller's line, not ours
