"""One process per run directory, and nothing written before the command is sure it may, as
``trainer-run`` meets it: a second run or resume of a directory in use is refused, a hard-linked
lock is refused and a hard-linked log kept, new runs and sweeps start only in new or empty
directories, a stop signal while the command starts is never lost, and a run of a newer format
is refused (runs/directory.py, cli/main.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import read_jsonl, run_cli, run_files

from tests.runs.test_directory import bytes_and_mtime, hard_links_line, users_file

QUIET = "trainer.progress=false"


def _one_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trainer_run.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_until_caught(pid: int, signum: int, timeout=60.0) -> None:
    """Until process ``pid`` catches ``signum`` (its SigCgt mask in /proc): before that, the
    interpreter is still starting and the default action would end it, whatever our code does
    (on a loaded machine that took longer than the test's shortest delay)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        mask = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        caught = int(mask.split()[1], 16)
        if caught >> (signum - 1) & 1:
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} never caught signal {signum}")


def _wait_for(path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_two_processes_never_share_a_run_directory(tmp_path):
    """The probe: two fresh runs with one hydra.run.dir both started and mixed their metrics.
    Now the second is refused at once, whether it is a new run or a resume, and the first's
    files are its own; SIGKILL releases the lock, so the run resumes right after."""
    out = tmp_path / "run"
    first = _start(f"hydra.run.dir={out}", "trainer.max_iterations=1000000", "trainer.log_interval=10",
                   "trainer.checkpoint_interval=50", QUIET)
    try:
        _wait_for(out / "checkpoints" / "latest")
        for args in ([f"hydra.run.dir={out}"], [f"resume={out}"]):
            result = run_cli(*args, "trainer.max_iterations=10", QUIET)
            assert result.returncode == 2
            line = _one_error(result)
            assert line.startswith("error: run directory ") and f"is in use by process {first.pid};" in line
        first.kill()
        first.wait()
        rows = read_jsonl(out / "metrics.jsonl")
        assert [r["iteration"] for r in rows] == list(range(10, 10 * len(rows) + 1, 10))
    finally:
        first.kill()
        first.wait()
    last = int((out / "checkpoints" / "latest").read_text().strip()[len("iter_"):])
    resumed = run_cli(f"resume={out}", f"trainer.max_iterations={last + 10}", QUIET)
    assert resumed.returncode == 0, resumed.stderr


# -- a lock or a log that is a hard link ---------------------------------------------------------
QUICK = ("trainer.max_iterations=6", "trainer.checkpoint_interval=3", "trainer.log_interval=3",
         "dataset.size=200", QUIET)


def test_a_resume_refuses_a_hard_linked_lock_and_keeps_a_hard_linked_log(tmp_path):
    """``trainer-run resume=<run>`` (and ``trainer_run.resume``): a .lock hard-linked to a file
    of the user's is one error line, exit 2, the file byte-identical; a metrics.jsonl with
    another name outside the run is replaced whole, never appended to in place, so that name
    keeps its bytes."""
    run = tmp_path / "run"
    assert run_cli(*QUICK, f"hydra.run.dir={run}").returncode == 0
    other = tmp_path / "notes.txt"
    before = users_file(other)
    (run / ".lock").unlink()
    os.link(other, run / ".lock")
    result = run_cli(f"resume={run}", "trainer.max_iterations=9", QUIET)
    assert result.returncode == 2, result.stderr
    assert _one_error(result) == f"error: {hard_links_line(run / '.lock')}"
    assert bytes_and_mtime(other) == before
    assert (run / "checkpoints" / "latest").read_text() == "iter_00000006\n"  # nothing trained
    from_python = subprocess.run([sys.executable, "-c", (
        "import sys, trainer_run\nfrom trainer_run.errors import JobFailed\n"
        "try:\n    trainer_run.resume(sys.argv[1], ['trainer.max_iterations=9'])\n"
        "except JobFailed as e:\n    print(e); sys.exit(e.exit_code)\n"), str(run)],
        capture_output=True, text=True, timeout=300)
    assert (from_python.returncode, from_python.stdout) == (2, hard_links_line(run / ".lock") + "\n")
    assert bytes_and_mtime(other) == before
    (run / ".lock").unlink()
    kept = tmp_path / "metrics-copy.jsonl"
    os.link(run / "metrics.jsonl", kept)
    before = users_file(kept)
    result = run_cli(f"resume={run}", "trainer.max_iterations=9", QUIET)
    assert result.returncode == 0, result.stderr
    assert bytes_and_mtime(kept) == before
    assert [row["iteration"] for row in read_jsonl(run / "metrics.jsonl")] == [3, 6, 9]
    assert os.stat(run / "metrics.jsonl").st_nlink == 1


# -- new runs and sweeps only in new or empty directories ----------------------------------------
def test_a_directory_holding_anything_but_a_run_is_refused_and_kept(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "model.npz").write_bytes(b"the user's own model")
    result = run_cli(f"hydra.run.dir={out}", "trainer.max_iterations=5", QUIET)
    assert result.returncode == 2
    assert _one_error(result) == (f"error: hydra.run.dir={out} is not empty (it holds model.npz); a new "
                                  "run starts only in a new or empty directory, so choose another "
                                  "hydra.run.dir")
    assert run_files(out) == {"model.npz": b"the user's own model"}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli(f"hydra.run.dir={empty}", "trainer.max_iterations=5", QUIET).returncode == 0


def test_a_sweep_of_other_overrides_writes_nothing_into_the_old_jobs(tmp_path):
    sweep = tmp_path / "sweep"
    first = run_cli("-m", "optimizer.learning_rate=0.1,0.01", f"hydra.sweep.dir={sweep}",
                    "trainer.max_iterations=5", QUIET)
    assert first.returncode == 0, first.stderr

    def jobs():
        return {p.relative_to(sweep): p.read_bytes() for p in sweep.rglob("*")
                if p.is_file() and p.parent != sweep and p.name != ".lock"}

    before, record = jobs(), (sweep / "multirun.yaml").read_text()
    second = run_cli("-m", "optimizer.learning_rate=0.5,0.05", f"hydra.sweep.dir={sweep}",
                     "trainer.max_iterations=5", QUIET)
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip() == (
        f"error: {sweep} holds a sweep of other overrides (optimizer.learning_rate=0.1,0.01 "
        f"trainer.max_iterations=5 {QUIET}); continue it with the same ones, or give "
        "hydra.sweep.dir a new folder")
    assert jobs() == before and (sweep / "multirun.yaml").read_text() == record


def test_a_folder_that_is_not_a_sweep_of_ours_is_refused_for_a_sweep_and_kept(tmp_path):
    """The probe: hydra.sweep.dir=<a folder with notes.txt and one run in a subfolder> was taken
    for a sweep to continue; its jobs, multirun.yaml and results landed beside the user's files
    and the foreign run was ranked. Only a folder whose multirun.yaml a sweep of ours marked
    (multirun.sig) continues; a copy of one without the mark is any other folder too."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    assert run_cli(f"hydra.run.dir={folder / 'r'}", "trainer.max_iterations=5", QUIET).returncode == 0

    def tree():
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    sweep = tmp_path / "sweep"
    assert run_cli("-m", "optimizer.learning_rate=0.1", f"hydra.sweep.dir={sweep}",
                   "trainer.max_iterations=5", QUIET).returncode == 0
    assert (sweep / "multirun.sig").read_text().startswith("hmac-sha256:")
    for copied in (False, True):
        if copied:  # Hydra's record of a sweep, without our mark
            (folder / "multirun.yaml").write_bytes((sweep / "multirun.yaml").read_bytes())
        before = tree()
        result = run_cli("-m", "optimizer.learning_rate=0.1", f"hydra.sweep.dir={folder}",
                         "trainer.max_iterations=5", QUIET)
        assert result.returncode == 2, result.stderr
        held = "multirun.yaml, notes.txt, r" if copied else "notes.txt, r"
        assert _one_error(result) == (f"error: hydra.sweep.dir={folder} is not empty (it holds {held}); "
                                      "a new sweep starts only in a new or empty directory, so choose "
                                      "another hydra.sweep.dir")
        assert tree() == before


# -- stop signals while the command starts ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_start_up_exits_with_one_line_and_is_never_lost(tmp_path, signum, code):
    """The probe: a SIGINT in the first second printed a KeyboardInterrupt traceback, and 2 of 54
    were lost (the run trained to the end and exited 0). Now every one, at any moment of the
    start-up, ends the command with 128 + signal: before training with one line and no run
    directory, or (when it lands after training began) as an interrupted run."""
    rng = random.Random(signum)
    for trial in range(12):
        out = tmp_path / f"run{trial}"
        process = _start(f"hydra.run.dir={out}", "trainer.max_iterations=200000", QUIET)
        _wait_until_caught(process.pid, signum)
        time.sleep(rng.random() * 1.2)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == code, (trial, stdout, stderr)
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
        if out.exists() and (out / "summary.json").exists():    # training had begun
            assert '"status": "interrupted"' in (out / "summary.json").read_text()
        else:
            assert not out.exists(), sorted(p.name for p in out.iterdir())
            assert stderr.strip() == (f"error: stopped by {signal.Signals(signum).name} before "
                                      "training started; nothing was trained")


def test_resuming_a_run_of_a_newer_format_is_one_line_and_changes_nothing(tmp_path):
    run = tmp_path / "run"
    done = run_cli(f"hydra.run.dir={run}", "dataset.size=120", "trainer.max_iterations=3",
                   "trainer.progress=false")
    assert done.returncode == 0, done.stderr
    (run / ".hydra" / "trainer-run.json").write_text('{"tool": "trainer-run", "format": 2}\n')
    before = run_files(run)
    result = run_cli(f"resume={run}", "trainer.max_iterations=6")
    assert result.returncode == 2
    assert _one_error(result) == (f"error: {run} is a run of a newer trainer-run (run format 2; "
                                  "this version reads up to 1): upgrade trainer-run (pip install "
                                  "-U trainer-run) to use it")
    assert run_files(run) == before
