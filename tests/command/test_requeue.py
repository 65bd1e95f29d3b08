"""A run in a SLURM job (``SLURM_JOB_ID`` set, as SLURM sets it) without a scheduler: SIGUSR1
stops it with a checkpoint and asks ``scontrol`` (a stand-in on PATH that records its
arguments) to requeue the job; the same command run again as the requeued job
(``SLURM_RESTART_COUNT=1``) resumes the run it recorded and ends bit-identical to an
uninterrupted run; another job's run is refused. ``test_slurm.py`` does the same under a real
SLURM."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from helpers import run_cli

from tests.command.test_preemption import Run, assert_same_run, rows_written, summary_of, wait_for

COMMAND = ("trainer.max_iterations=3000", "trainer.checkpoint_interval=100", "trainer.log_interval=50",
           "trainer.eval_interval=500")


@pytest.fixture
def slurm_job(tmp_path, monkeypatch):
    """This test's processes as SLURM job 42; ``scontrol`` records its arguments in a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol.calls"
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    return calls


def test_usr1_checkpoints_asks_slurm_to_requeue_and_the_requeued_job_resumes_bit_for_bit(
        tmp_path, slurm_job, monkeypatch):
    reference = tmp_path / "reference"
    done = Run(tmp_path / "reference.log", *COMMAND, f"hydra.run.dir={reference}")
    assert done.wait() == 0, done.output()

    out = tmp_path / "run"
    run = Run(tmp_path / "first.log", *COMMAND, f"hydra.run.dir={out}")
    assert wait_for(lambda: rows_written(out) >= 4, run), run.output()
    run.signal(signal.SIGUSR1)
    assert run.wait(30) == 128 + signal.SIGUSR1, run.output()
    assert summary_of(out)["status"] == "interrupted"
    assert json.loads((out / ".hydra" / "slurm.json").read_text()) == {"job_id": "42"}
    assert slurm_job.read_text() == "requeue 42\n"
    assert "SIGUSR1: SLURM job 42 requeued; it continues from this checkpoint" in run.output()

    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    again = Run(tmp_path / "again.log", *COMMAND, f"hydra.run.dir={out}")
    assert again.wait() == 0, again.output()
    assert f"SLURM job 42 was requeued (restart 1): continuing its run in {out}" in again.output()
    assert_same_run(out, reference)


def test_a_requeued_job_does_not_take_over_another_jobs_run(tmp_path, slurm_job, monkeypatch):
    out = tmp_path / "run"
    first = run_cli(*COMMAND, "trainer.max_iterations=100", f"hydra.run.dir={out}")
    assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in Path(out).rglob("*") if p.is_file() and p.name != ".lock"}

    monkeypatch.setenv("SLURM_JOB_ID", "43")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    other = run_cli(*COMMAND, f"hydra.run.dir={out}")
    assert other.returncode == 2, other.stderr
    lines = other.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {out} already holds a run;"), other.stderr
    assert {p: p.read_bytes() for p in Path(out).rglob("*") if p.is_file() and p.name != ".lock"} == before


def test_outside_slurm_nothing_is_recorded_and_usr1_is_not_a_stop_signal(tmp_path, monkeypatch):
    """SIGUSR1 keeps its default action (the process ends at once) where no SLURM job asks to
    be requeued with it."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    out = tmp_path / "run"
    run = Run(tmp_path / "run.log", *COMMAND, f"hydra.run.dir={out}")
    assert wait_for(lambda: rows_written(out) >= 2, run), run.output()
    run.signal(signal.SIGUSR1)
    assert run.wait(30) == -signal.SIGUSR1
    assert not (out / ".hydra" / "slurm.json").exists()
