"""Preemption end to end, with real processes and real signals: a run killed (SIGKILL) at
random moments and resumed each time ends bit-identical to an uninterrupted one; SIGINT and
SIGTERM finish the iteration, checkpoint and exit 130 / 143; a second signal aborts at once
and the last complete checkpoint still resumes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
from helpers import load_npz, read_jsonl

from trainer_run.errors import ConfigError
from trainer_run.runs.checkpoint_tree import main_params
from trainer_run.storage import checkpoint

QUIET = "trainer.progress=false"


class Run:
    """One ``trainer-run`` process started in the background, its output going to ``log``."""

    def __init__(self, log: Path, *args):
        self.log = log
        self.started = time.perf_counter()
        with open(log, "w") as f:
            self.proc = subprocess.Popen([sys.executable, "-m", "trainer_run.cli", QUIET, *map(str, args)],
                                         stdout=f, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text()

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"the run did not end within {timeout} s; its output:\n{self.output()}")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)


def wait_for(condition, run: Run, timeout: float = 60, interval: float = 0.002) -> bool:
    """Polls ``condition`` until it holds (True) or ``run`` ends first (then what it says)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if run.proc.poll() is not None:
            return condition()
        if time.monotonic() > deadline:
            run.proc.kill()
            run.proc.wait()
            pytest.fail(f"nothing happened within {timeout} s; the run's output:\n{run.output()}")
        time.sleep(interval)
    return True


def rows_written(out: Path) -> int:
    """Complete lines of ``metrics.jsonl`` so far (0 before it exists)."""
    try:
        return (out / "metrics.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def file_identity(path: Path):
    """(device, inode) of ``path``, None if absent: tells a file replaced by ``os.replace``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def partial_writes(checkpoints: Path) -> list[str]:
    try:
        return sorted(p.name for p in checkpoints.iterdir() if p.name.startswith(".tmp-"))
    except FileNotFoundError:
        return []


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def without(row: dict, *keys) -> dict:
    return {k: v for k, v in row.items() if k not in keys}


def assert_same_model_and_metrics(out: Path, reference: Path) -> None:
    """model.npz bit for bit, metrics.jsonl apart from the timings."""
    expected, actual = load_npz(reference / "model.npz"), load_npz(out / "model.npz")
    assert sorted(actual) == sorted(expected)
    for key in expected:
        numpy.testing.assert_array_equal(actual[key], expected[key], err_msg=key, strict=True)
    assert ([without(r, "elapsed_s", "time") for r in read_jsonl(out / "metrics.jsonl")]
            == [without(r, "elapsed_s", "time") for r in read_jsonl(reference / "metrics.jsonl")])


def assert_same_run(out: Path, reference: Path) -> None:
    """:func:`assert_same_model_and_metrics`, and summary.json apart from the timings."""
    assert_same_model_and_metrics(out, reference)
    timings = ("elapsed_s", "samples_per_s", "peak_memory_bytes")
    assert without(summary_of(out), *timings) == without(summary_of(reference), *timings)


# -- killed at random moments --------------------------------------------------------------

ITERATIONS = 2000
KILL_RUN = (f"trainer.max_iterations={ITERATIONS}", "trainer.checkpoint_interval=10",
            "trainer.keep_checkpoints=2", "trainer.log_interval=50", "trainer.eval_interval=500")
KILLS = 20


def resume_point(out: Path) -> Path | None:
    """The checkpoint ``resume=<out>`` would continue from; None where there is none."""
    try:
        return checkpoint.find(out)
    except ConfigError:
        return None


def check_after_a_kill(out: Path) -> None:
    """Whatever the moment of the kill, ``latest`` names a complete checkpoint and it is the
    one a resume picks, without passing over a bad one."""
    latest = out / "checkpoints" / checkpoint.LATEST
    if not latest.exists():
        return
    named = out / "checkpoints" / latest.read_text().strip()
    checkpoint.verify(named)
    skipped: list[str] = []
    assert checkpoint.find(out, report=skipped.append) == named
    assert skipped == []


def test_killed_20_times_at_random_moments_and_resumed_equals_an_uninterrupted_run(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    reference = tmp_path / "reference"
    run = Run(logs / "reference.log", f"hydra.run.dir={reference}", *KILL_RUN)
    assert wait_for(lambda: (reference / "metrics.jsonl").exists(), run), run.output()
    startup = time.perf_counter() - run.started  # imports, config, data: until training starts
    assert run.wait() == 0, run.output()
    # The pace of training, from the reference's log: a warm-up (the first steps compile
    # the fused optimizer loops), then a steady time per iteration, checkpoints included.
    rows = read_jsonl(reference / "metrics.jsonl")
    per_iteration = ((rows[-1]["elapsed_s"] - rows[0]["elapsed_s"])
                     / (rows[-1]["iteration"] - rows[0]["iteration"]))
    state = json.loads((resume_point(reference) / "state.json").read_text())["trainer"]
    began = state["extensions"]["log_report"]["elapsed_s"] - state["elapsed_time"]  # log's clock
    warmup = max(0.0, rows[0]["elapsed_s"] - began - rows[0]["iteration"] * per_iteration)

    out = tmp_path / "killed"
    rng = numpy.random.default_rng(20240611)
    # Where to kill, in iterations, spread over the run; 1 kill in 5 lands in the start-up
    # instead (imports, reading the checkpoint, rewriting metrics.jsonl).
    targets = numpy.sort(rng.uniform(0, 0.95 * ITERATIONS, KILLS))
    kills, after_a_checkpoint, in_startup, finished, torn = 0, 0, 0, 0, 0
    points = []
    for attempt in range(3 * KILLS):
        if kills == KILLS:
            break
        found = resume_point(out)
        if found is None:  # killed before its first checkpoint: start again
            shutil.rmtree(out, ignore_errors=True)
            args = [f"hydra.run.dir={out}", *KILL_RUN]
            saved = 0
        else:
            args = [f"resume={out}"]
            saved = int(found.name[len(checkpoint.PREFIX):])
        points.append(saved)
        before = file_identity(out / "metrics.jsonl")
        run = Run(logs / f"{attempt:02d}.log", *args)
        if rng.random() < 0.2 or saved == ITERATIONS:  # (a finished run only starts up)
            delay = rng.uniform(0.05, 1.0) * startup
            in_startup += 1
        else:  # from the moment it trains (LogReport has rewritten metrics.jsonl)
            wait_for(lambda: file_identity(out / "metrics.jsonl") not in (None, before), run)
            startup = time.perf_counter() - run.started  # the latest start-up, under today's load
            delay = warmup + max(0.0, targets[kills] - saved) * per_iteration + rng.uniform(0, 0.02)
        try:
            code = run.proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            run.proc.send_signal(signal.SIGKILL)
            code = run.proc.wait()
        if code == -signal.SIGKILL:
            kills += 1
            after_a_checkpoint += found is not None
            torn += bool(partial_writes(out / "checkpoints"))
        else:  # it finished before the kill came
            assert code == 0, run.output()
            finished += 1
        check_after_a_kill(out)
    assert kills == KILLS, f"only {kills} kills in {attempt + 1} attempts"

    found = resume_point(out)
    args = [f"resume={out}"] if found is not None else [f"hydra.run.dir={out}", *KILL_RUN]
    if found is None:
        shutil.rmtree(out, ignore_errors=True)
    run = Run(logs / "last.log", *args)
    assert run.wait() == 0, run.output()

    report = (f"last startup {startup:.2f} s, warm-up {warmup:.2f} s, "
              f"{per_iteration * 1e3:.2f} ms/iteration; "
              f"aimed at {targets.astype(int).tolist()}, resumed from {points}; "
              f"{in_startup} aimed at the start-up, {torn} left a partial checkpoint, "
              f"{finished} runs finished before their kill")
    print(report)
    assert after_a_checkpoint >= 10, report
    summary = summary_of(out)
    assert summary["status"] == "completed" and summary["iteration"] == ITERATIONS
    assert_same_run(out, reference)
    assert partial_writes(out / "checkpoints") == []
    assert (out / "checkpoints" / "latest").read_text().strip() == f"iter_{ITERATIONS:08d}"


# -- SIGINT / SIGTERM ----------------------------------------------------------------------

@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_checkpoints_the_iteration_it_ends_at_and_resumes(tmp_path, signum, code):
    out = tmp_path / "run"
    run = Run(tmp_path / "run.log", f"hydra.run.dir={out}", "trainer.max_iterations=200000",
              "trainer.checkpoint_interval=100000")
    assert wait_for(lambda: rows_written(out) >= 2, run), run.output()  # training, handlers set
    time.sleep(numpy.random.default_rng(signum).uniform(0, 0.05))
    run.signal(signum)
    assert run.wait(30) == code, run.output()
    assert "Traceback" not in run.output()

    summary = summary_of(out)
    assert summary["status"] == "interrupted"
    n = summary["iteration"]
    assert 100 <= n < 200000
    name = f"iter_{n:08d}"
    assert (out / "checkpoints" / "latest").read_text().strip() == name
    checkpoint.verify(out / "checkpoints" / name)
    assert checkpoint.find(out) == out / "checkpoints" / name
    state = checkpoint.load(out / "checkpoints" / name)
    assert state["trainer"]["updater"]["iteration"] == n
    params = main_params(state)
    model = load_npz(out / "model.npz")
    assert sorted(model) == sorted(params)
    for key in model:
        numpy.testing.assert_array_equal(model[key], params[key], err_msg=key, strict=True)

    resumed = Run(tmp_path / "resume.log", f"resume={out}", f"trainer.max_iterations={n + 20}")
    assert resumed.wait() == 0, resumed.output()
    summary = summary_of(out)
    assert summary["status"] == "completed" and summary["iteration"] == n + 20
    assert (out / "checkpoints" / "latest").read_text().strip() == f"iter_{n + 20:08d}"
    assert read_jsonl(out / "metrics.jsonl")[-1]["iteration"] == n + 20


def test_the_printed_resume_line_works_when_pasted_for_a_directory_with_a_space_and_an_umlaut(tmp_path):
    """The probe: after Ctrl-C in a run whose directory has a space and a non-ASCII letter,
    the printed ``resume with: ...`` failed to parse in Hydra. Now the line, run through the
    shell, resumes the run and completes it."""
    import shlex

    out = tmp_path / "my runs" / "über"
    run = Run(tmp_path / "run.log", f'hydra.run.dir="{out}"', "trainer.max_iterations=200000",
              "trainer.checkpoint_interval=100000")
    assert wait_for(lambda: rows_written(out) >= 2, run), run.output()
    run.signal(signal.SIGINT)
    assert run.wait(30) == 130, run.output()
    line = run.output().strip().splitlines()[-1]
    assert line.startswith("resume with: trainer-run resume="), line
    n = summary_of(out)["iteration"]
    command = line[len("resume with: trainer-run "):]
    resumed = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m trainer_run.cli "
                              f"{command} trainer.max_iterations={n + 5} {QUIET}"],
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    summary = summary_of(out)
    assert summary["status"] == "completed" and summary["iteration"] == n + 5


def test_interrupted_at_a_random_point_then_resumed_equals_an_uninterrupted_run(tmp_path):
    total = 2000
    common = (f"trainer.max_iterations={total}", "trainer.checkpoint_interval=500",
              "trainer.log_interval=50", "trainer.eval_interval=250")
    reference = tmp_path / "reference"
    run = Run(tmp_path / "reference.log", f"hydra.run.dir={reference}", *common)
    assert run.wait() == 0, run.output()

    rng = numpy.random.default_rng(7)
    after_row = int(rng.integers(1, 30))  # interrupt after the row of iteration 50 * after_row
    out = tmp_path / "interrupted"
    run = Run(tmp_path / "interrupted.log", f"hydra.run.dir={out}", *common)
    assert wait_for(lambda: rows_written(out) >= after_row, run, interval=0.001), run.output()
    time.sleep(rng.uniform(0, 0.02))
    run.signal(signal.SIGINT)
    assert run.wait(30) == 130, run.output()
    n = summary_of(out)["iteration"]
    assert summary_of(out)["status"] == "interrupted"
    assert 50 * after_row <= n < total

    run = Run(tmp_path / "resume.log", f"resume={out}")
    assert run.wait() == 0, run.output()
    assert summary_of(out)["status"] == "completed"
    assert_same_run(out, reference)


def test_a_second_signal_aborts_at_once_and_the_last_complete_checkpoint_resumes(tmp_path):
    out = tmp_path / "run"
    checkpoints = out / "checkpoints"
    # Checkpoints of ~8 MB: the final one takes long enough to be interrupted while written.
    run = Run(tmp_path / "run.log", f"hydra.run.dir={out}", "dataset=mnist_like",
              "model.hidden_sizes=[512,512]", "trainer.max_iterations=100000",
              "trainer.checkpoint_interval=20", "trainer.keep_checkpoints=2", "trainer.log_interval=10")
    # Signal halfway between two checkpoints (rows every 10 iterations, checkpoints every 20:
    # an odd number of rows), so that the next write is the final one the signal asks for.
    def halfway():
        return (checkpoints / "latest").exists() and rows_written(out) % 2 == 1

    assert wait_for(halfway, run, timeout=120, interval=0.0005), run.output()
    run.signal(signal.SIGINT)
    writing = wait_for(lambda: partial_writes(checkpoints) != [], run, interval=0.0005)
    assert writing, f"no final checkpoint was being written:\n{run.output()}"
    sent = time.perf_counter()
    run.signal(signal.SIGINT)
    code = run.wait(timeout=5)
    took = time.perf_counter() - sent
    assert code == 130, run.output()
    assert "SIGINT again: aborting now" in run.output()
    assert took < 5

    found = checkpoint.find(out)
    checkpoint.verify(found)
    assert found.name == (checkpoints / "latest").read_text().strip()
    n = int(found.name[len(checkpoint.PREFIX):])
    assert n > 0

    resumed = Run(tmp_path / "resume.log", f"resume={out}", f"trainer.max_iterations={n + 5}")
    assert resumed.wait() == 0, resumed.output()
    summary = summary_of(out)
    assert summary["status"] == "completed" and summary["iteration"] == n + 5
    assert partial_writes(checkpoints) == []  # the aborted write was cleaned up
    checkpoint.verify(checkpoints / f"iter_{n + 5:08d}")


def test_what_a_killed_process_leaves_behind_is_removed_by_the_next_save(tmp_path):
    out = tmp_path / "run"
    run = Run(tmp_path / "run.log", f"hydra.run.dir={out}", "trainer.max_iterations=20",
              "trainer.checkpoint_interval=10")
    assert run.wait() == 0, run.output()
    checkpoints = out / "checkpoints"
    # What SIGKILL leaves at three moments of checkpoint.save in a process long gone (the
    # first was seen after the kills above): writing the files, replacing `latest`, and
    # between moving an existing iter_N aside and removing it.
    dead = 4194303  # above any pid the kernel hands out by default
    (checkpoints / f".tmp-iter_00000030-{dead}").mkdir()
    (checkpoints / f".tmp-iter_00000030-{dead}" / checkpoint.ARRAYS).write_bytes(b"PK")
    (checkpoints / f".latest.tmp-{dead}").write_text("iter_000")
    (checkpoints / f".best.tmp-{dead}").write_text("iter_000")
    shutil.copytree(checkpoints / "iter_00000020", checkpoints / f".old-iter_00000020-{dead}")

    resumed = Run(tmp_path / "resume.log", f"resume={out}", "trainer.max_iterations=40")
    assert resumed.wait() == 0, resumed.output()
    assert summary_of(out)["iteration"] == 40
    assert sorted(p.name for p in checkpoints.iterdir()) == ["best", "iter_00000020", "iter_00000030",
                                                             "iter_00000040", "latest"]
