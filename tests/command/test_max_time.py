"""``trainer.max_time`` from the command line: a run ended by it says so, keeps a checkpoint of
its last iteration and resumes, with the whole limit again, to the model of a run never
stopped; a bad value is one line and nothing is written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli

from trainer_run.storage import checkpoint

STALL = '''import time


class Stall:
    """Sleeps ``seconds`` at the end of update ``at`` (0-based)."""

    def __init__(self, at, seconds):
        self.at, self.seconds = at, seconds

    def __call__(self, iteration):
        if iteration == self.at:
            time.sleep(self.seconds)
'''


COMMON = ("trainer.max_iterations=30", "trainer.progress=false", "trainer.log_interval=10",
          "trainer.eval_interval=10", "trainer.checkpoint_interval=10")


def test_a_run_ended_by_max_time_says_so_keeps_a_checkpoint_and_resumes_to_the_same_model(tmp_path):
    """trainer.max_time=2 and a sleep of 2.5 s at the end of update 13: the run ends after update
    13 at the latest (earlier on a slow machine), completed, with a checkpoint of that iteration
    and the lines that say how to go on. ``resume=`` continues it (it is not at its iteration
    limit), and training to the end gives the model of a run never stopped, bit for bit."""
    (tmp_path / "stall.py").write_text(STALL)
    stall = "updater.callbacks.update_on_finish={_target_: stall.Stall, at: 12, seconds: 2.5}"
    done = run_cli(*COMMON, "trainer.max_time=00:00:00:02", stall, "hydra.run.dir=cut", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cut = tmp_path / "cut"
    summary = json.loads((cut / "summary.json").read_text())
    stopped = summary["iteration"]
    assert (summary["status"], summary["stop_reason"]) == ("completed", "max_time")
    assert stopped <= 13 and checkpoint.find(cut).name == checkpoint.name_of(stopped)
    assert read_jsonl(cut / "metrics.jsonl")[-1]["iteration"] == stopped
    lines = done.stdout.splitlines()
    assert lines[-2].startswith(f"resume with: trainer-run resume={cut}")
    assert f"time limit reached: trainer.max_time=2 s (00:00:00:02) of training in this session, " \
           f"stopped after iteration {stopped}" in lines[-3]

    again = run_cli("resume=cut", cwd=tmp_path)  # the same limit, counted anew
    assert again.returncode == 0, again.stderr
    assert json.loads((cut / "summary.json").read_text())["iteration"] > stopped
    end = run_cli("resume=cut", "trainer.max_time=null", cwd=tmp_path)
    assert end.returncode == 0, end.stderr
    straight = run_cli(*COMMON, "hydra.run.dir=straight", cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr
    a, b = load_npz(cut / "model.npz"), load_npz(tmp_path / "straight" / "model.npz")
    for k in b:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("value", ["0", "-5", "abc", "00:00:00:00", "1:2:3", "true", "[1]"])
def test_a_bad_max_time_is_one_line_and_nothing_is_written(tmp_path, value):
    out = tmp_path / "run"
    done = run_cli(f"trainer.max_time={value}", f"hydra.run.dir={out}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "error: trainer.max_time must be" in done.stderr
    assert not out.exists()
