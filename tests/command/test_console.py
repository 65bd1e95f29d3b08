"""What a person sees: the run directory first and last, one plain line per log interval when
stdout is not a terminal, a live bar when it is, every evaluation row in the final table, the
resume command after an interruption, and limits that mean what they say."""

from __future__ import annotations

import json
import math
import os
import pty
import re
import signal
import subprocess
import sys
import time

from helpers import read_jsonl, run_cli

SHORT = ("trainer.max_iterations=40", "trainer.log_interval=10", "trainer.eval_interval=20")
LINE = re.compile(r"^it (\d+)/(\d+)  epoch [\d.]+  samples/s [\d,-]+  elapsed \d+:\d\d:\d\d  "
                  r"ETA (\d+:\d\d:\d\d|-)  train/loss (\S+)")


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def test_a_piped_run_prints_its_directory_first_and_last_and_a_plain_line_per_log_row(tmp_path):
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", *SHORT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == lines[-1] == f"run directory: {out}"
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    progress = [LINE.match(line) for line in lines if line.startswith("it ")]
    assert all(progress), lines
    rows = read_jsonl(out / "metrics.jsonl")
    assert [int(m.group(1)) for m in progress] == [row["iteration"] for row in rows] == [10, 20, 30, 40]
    # the line's train/loss is the log row's (the mean since the previous row), as in the table
    assert [float(m.group(4)) for m in progress] == [float(f"{row['train/loss']:.4g}") for row in rows]
    last = next(line for line in lines if line.startswith("it 40/40"))
    best = _summary(out)["objective"]
    assert f"best val/loss {best['best']:.4g} @{best['best_iteration']}" in last


def test_progress_false_means_no_bar_not_silence(tmp_path):
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", *SHORT, "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("it ") for line in result.stdout.splitlines()) == 4
    assert "model: MLP" in result.stdout and "metrics (completed)" in result.stdout


def test_a_terminal_gets_the_live_bar(tmp_path):
    """stdout a pseudo-terminal: the bar (redrawn in place) with the same labelled fields."""
    out = tmp_path / "run"
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "trainer_run.cli", f"hydra.run.dir={out}",
                                *SHORT], stdout=follower, stderr=subprocess.PIPE,
                               env={**os.environ, "COLUMNS": "160"})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert process.wait(timeout=120) == 0, process.stderr.read()
    screen = b"".join(chunks).decode()
    assert "\x1b[" in screen  # the bar is redrawn with cursor movements
    assert "it 40/40" in screen and "ETA" in screen and "train/loss" in screen
    assert not any(line.startswith("it 10/40  epoch") for line in screen.splitlines())


def test_the_final_table_of_a_long_run_shows_every_evaluation(tmp_path):
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", "trainer.max_iterations=60", "trainer.log_interval=1",
                     "trainer.eval_interval=7", "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("metrics (completed)")[1]
    shown = {int(m) for m in re.findall(r"^│\s+(\d+) │", table, flags=re.M)}
    assert {7, 14, 21, 28, 35, 42, 49, 56, 60} <= shown and len(shown) == 20
    assert "every evaluation row; 11 of 51 training-only rows shown" in " ".join(table.split())


def test_an_interrupted_run_says_where_its_checkpoint_is_and_how_to_resume(tmp_path):
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "trainer_run.cli", f"hydra.run.dir={out}",
                                "trainer.max_iterations=1000000", "trainer.progress=false"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text():
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    iteration = _summary(out)["iteration"]
    assert stdout.splitlines()[-3:] == [
        f"run directory: {out}",
        f"interrupted at iteration {iteration}; checkpoint {out}/checkpoints/iter_{iteration:08d}",
        f"resume with: trainer-run resume={out}"]
    resumed = run_cli(f"resume={out}", f"trainer.max_iterations={iteration + 5}")
    assert resumed.returncode == 0, resumed.stderr
    assert _summary(out)["iteration"] == iteration + 5


def test_max_epochs_alone_trains_that_many_epochs(tmp_path):
    """The default has no iteration limit of its own once max_epochs is given (it used to stop
    at 1000 iterations whatever max_epochs said)."""
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", "trainer.max_epochs=40", "trainer.progress=false",
                     "trainer.eval_interval=10000", "trainer.log_interval=10000")
    assert result.returncode == 0, result.stderr
    per_epoch = 1600 / 50   # spirals: 1600 training examples; batch size 50
    assert _summary(out)["iteration"] == math.ceil(40 * per_epoch) == 1280
    assert _summary(out)["stop_reason"] == "max_epochs"
    assert "ends this run" not in result.stdout


def test_with_both_limits_the_run_says_which_one_stops_it(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'a'}", "trainer.max_epochs=100",
                     "trainer.max_iterations=100", "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    assert ("trainer.max_iterations=100 ends this run at epoch 3.12, before trainer.max_epochs=100 "
            "(iteration 3200); trainer.max_iterations=null trains 100 epochs") in result.stdout
    result = run_cli(f"hydra.run.dir={tmp_path / 'b'}", "trainer.max_epochs=1",
                     "trainer.max_iterations=100", "trainer.progress=false")
    assert ("trainer.max_epochs=1 ends this run at iteration 32, before trainer.max_iterations=100; "
            "trainer.max_epochs=null trains to the iteration limit") in result.stdout
    assert _summary(tmp_path / "b")["iteration"] == 32
