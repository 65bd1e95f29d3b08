"""runner/slurm_requeue.py, in-process: a requeued SLURM job's command becomes the resume of the
run it started (found by the job id its run recorded), and a requeue signal puts the job back
in the queue through the handler that had it before (submitit's) or ``scontrol requeue`` (a
stand-in here that records its arguments), a refusal being one warning. The command-level
requeues are tests/command/test_requeue.py's and test_slurm.py's."""

from __future__ import annotations

import os
import signal

import pytest

from trainer_run.runner import slurm_requeue
from trainer_run.runs import directory, slurm_record


@pytest.fixture
def job(monkeypatch):
    """This process as SLURM job 42, requeued once."""
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")


def started(run, job_id: str):
    """A run folder (our mark) started by the SLURM job ``job_id``."""
    (run / ".hydra").mkdir(parents=True)
    directory.mark(run / ".hydra")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SLURM_JOB_ID", job_id)
        slurm_record.record(run / ".hydra", run)
    return run


@pytest.mark.parametrize("count, expected", [(None, 0), ("0", 0), ("3", 3), ("x", 0), ("-1", 0)])
def test_restarts_is_slurms_count_and_0_otherwise(monkeypatch, count, expected):
    if count is None:
        monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    else:
        monkeypatch.setenv("SLURM_RESTART_COUNT", count)
    assert slurm_requeue.restarts() == expected


def test_a_requeued_job_resumes_the_run_it_started(tmp_path, job, capsys):
    run = started(tmp_path / "run", "42")
    argv = ["--config-dir", "conf", f"hydra.run.dir={run}", "seed=1"]
    assert slurm_requeue.continued(argv) == ["--config-dir", "conf", f"resume='{run.resolve()}'",
                                             f"hydra.run.dir={run}", "seed=1"]
    assert capsys.readouterr().out == (f"SLURM job 42 was requeued (restart 1): continuing its "
                                       f"run in {run}\n")


def test_with_no_run_directory_it_finds_its_run_among_the_default_ones_newest_first(
        tmp_path, job, monkeypatch):
    monkeypatch.chdir(tmp_path)
    started(tmp_path / "runs" / "2026-01-01" / "10-00-00", "42")
    newest = started(tmp_path / "runs" / "2026-01-02" / "09-00-00", "42")
    started(tmp_path / "runs" / "2026-01-03" / "08-00-00", "41")  # another job's
    assert slurm_requeue.continued(["seed=1"]) == [f"resume='{newest.resolve()}'", "seed=1"]


@pytest.mark.parametrize("case", ["outside-slurm", "first-start", "resume-given", "another-job",
                                  "not-a-run"])
def test_any_other_command_is_left_as_it_is(tmp_path, job, monkeypatch, case, capsys):
    run = started(tmp_path / "run", "41" if case == "another-job" else "42")
    argv = [f"hydra.run.dir={run}", "seed=1"]
    if case == "outside-slurm":  # a run started outside SLURM, which records no job
        monkeypatch.delenv("SLURM_JOB_ID")
        (run / ".hydra" / "slurm.json").unlink()
    elif case == "first-start":
        monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    elif case == "resume-given":
        argv.append(f"resume={run}")
    elif case == "not-a-run":
        (run / ".hydra" / "trainer-run.json").unlink()
    assert slurm_requeue.continued(list(argv)) == argv
    assert capsys.readouterr().out == ""


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """``scontrol`` on PATH: records its arguments, and prints ``say`` and exits ``code`` when
    those files exist."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                      f'[ -f {tmp_path}/say ] && cat {tmp_path}/say >&2\n'
                      f'[ -f {tmp_path}/code ] && exit $(cat {tmp_path}/code)\nexit 0\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(slurm_requeue.stop_signals, "earlier", lambda signum: None)
    return calls


def test_a_requeue_signal_asks_scontrol_to_requeue_the_job(job, scontrol, capsys):
    slurm_requeue.requeue(signal.SIGUSR1)
    assert scontrol.read_text() == "requeue 42\n"
    assert capsys.readouterr().out == ("SIGUSR1: SLURM job 42 requeued; it continues from this "
                                       "checkpoint when it starts again\n")


def test_a_refused_requeue_is_one_warning_with_what_scontrol_said_last(job, scontrol, tmp_path,
                                                                       capsys):
    (tmp_path / "say").write_text("scontrol: first\nscontrol: Requested operation is disabled\n")
    (tmp_path / "code").write_text("1")
    slurm_requeue.requeue(signal.SIGUSR2)
    assert scontrol.read_text() == "requeue 42\n"
    assert capsys.readouterr().err == (
        "warning: SIGUSR2: SLURM did not requeue job 42 (scontrol: Requested operation is "
        "disabled); submit it with --requeue, or resume the run by hand\n")


def test_without_scontrol_the_warning_says_so(job, scontrol, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    slurm_requeue.requeue(signal.SIGUSR1)
    assert capsys.readouterr().err == (
        "warning: SIGUSR1: SLURM did not requeue job 42 (scontrol: No such file or directory); "
        "submit it with --requeue, or resume the run by hand\n")


@pytest.mark.parametrize("case", ["outside-slurm", "sigterm"])
def test_no_requeue_outside_slurm_nor_for_a_stop_signal(job, scontrol, monkeypatch, case, capsys):
    if case == "outside-slurm":
        monkeypatch.delenv("SLURM_JOB_ID")
    slurm_requeue.requeue(signal.SIGUSR1 if case == "outside-slurm" else signal.SIGTERM)
    assert not scontrol.exists()
    assert capsys.readouterr() == ("", "")


def test_an_earlier_handler_requeues_instead_and_its_refusal_is_one_warning(job, scontrol,
                                                                            monkeypatch, capsys):
    called = []

    def submitits(signum, frame):
        called.append((signum, frame))
        if len(called) == 2:
            raise RuntimeError("timed-out too many times")

    monkeypatch.setattr(slurm_requeue.stop_signals, "earlier",
                        lambda signum: submitits if signum == signal.SIGUSR1 else None)
    slurm_requeue.requeue(signal.SIGUSR1)
    assert called == [(signal.SIGUSR1, None)] and not scontrol.exists()
    assert capsys.readouterr() == ("", "")
    slurm_requeue.requeue(signal.SIGUSR1)
    assert capsys.readouterr().err == (
        "warning: SIGUSR1: submitit did not requeue the job (timed-out too many times); run the "
        "sweep again to continue it (hydra.launcher.max_num_timeout: how often a job may be "
        "requeued at its time limit)\n")
