"""A run outlives its terminal and its readers: closing the terminal it runs in (SIGHUP, a
pty that hangs up) or the pipe its output goes to (``2>&1 | head -1``), before or during
training, leaves it training to its end, writing its files, with exit status 0."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest

COMMAND = [sys.executable, "-m", "trainer_run.cli"]


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def wait(pid: int, timeout: float) -> int:
    """The exit status of child ``pid`` (``-signal`` when a signal killed it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    pytest.fail(f"the run still ran {timeout} s after its terminal closed")


@pytest.mark.parametrize("progress", ["true", "false"], ids=["live", "plain"])
def test_a_run_whose_terminal_closes_trains_on_to_its_end(tmp_path, progress):
    """The run is the session leader of a pty (its controlling terminal, as in an ssh
    session); the pty is closed while it trains: SIGHUP, then writes that fail with EIO."""
    run = tmp_path / "run"
    pid, master = pty.fork()
    if pid == 0:  # the child: a run on the pty, long enough to be mid-training at the hangup
        os.chdir(tmp_path)
        os.execv(sys.executable, [*COMMAND, f"hydra.run.dir={run}", "trainer.max_iterations=3000",
                                  "trainer.log_interval=50", f"trainer.progress={progress}"])
    seen = b""
    deadline = time.monotonic() + 120
    while b"it " not in seen and time.monotonic() < deadline:  # the first progress line
        if select.select([master], [], [], 1)[0]:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
    os.close(master)  # the terminal goes away
    assert b"it " in seen, seen.decode(errors="replace")
    assert not (run / "summary.json").exists()  # it was still training
    assert wait(pid, 180) == 0
    result = summary(run)
    assert (result["status"], result["stop_reason"], result["iteration"]) == \
        ("completed", "max_iterations", 3000)
    assert (run / "checkpoints" / "latest").read_text().strip() == "iter_00003000"
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["iteration"] == 3000


def whole_number_labels(folder: Path) -> Path:
    """A set whose float labels are whole numbers: the run says a ``hint:`` on stderr before
    training, the first thing a ``2>&1 | head -1`` reader may miss."""
    rng = numpy.random.default_rng(0)
    path = folder / "whole.npz"
    numpy.savez(path, x=rng.normal(size=(200, 3)).astype(numpy.float32),
                y=(numpy.arange(200) % 3).astype(numpy.float64))
    return path


@pytest.mark.parametrize("reader", ["head -1", "true", "(sleep 1; head -c 10 >/dev/null)"],
                         ids=["head", "gone-at-once", "gone-mid-run"])
@pytest.mark.parametrize("streams", ["2>&1", "2>/dev/null", "1>/dev/null 2>&1"],
                         ids=["both", "stdout", "stderr"])
def test_a_run_whose_reader_goes_away_trains_on_and_writes_its_files(tmp_path, reader, streams):
    data = whole_number_labels(tmp_path)
    run = tmp_path / "run"
    args = " ".join(f"'{a}'" for a in [*COMMAND, "dataset=npz", f"dataset.path={data}",
                                        "trainer.max_iterations=200", f"hydra.run.dir={run}"])
    if streams == "1>/dev/null 2>&1":  # stderr alone into the pipe
        shell = f"{args} 2>&1 1>/dev/null | {reader}; echo \"status=${{PIPESTATUS[0]}}\" >&2"
    else:
        shell = f"{args} {streams} | {reader}; echo \"status=${{PIPESTATUS[0]}}\" >&2"
    done = subprocess.run(["bash", "-c", shell], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert "status=0" in done.stderr, done.stderr
    result = summary(run)
    assert (result["status"], result["iteration"]) == ("completed", 200)
    assert (run / "model.npz").is_file() and (run / "checkpoints" / "latest").is_file()
