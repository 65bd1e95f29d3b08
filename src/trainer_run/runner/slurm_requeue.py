"""A run in a SLURM job that is preempted or reaches its time limit goes on where it stopped,
as Lightning's SLURM auto-requeue does.

- **The signals.** In a SLURM job, SIGTERM (what preemption and ``scancel`` send) stops the
  run after the current iteration with a checkpoint, as everywhere. SIGUSR1 and SIGUSR2
  (:data:`trainer_run.stop_signals.REQUEUE`: what ``#SBATCH --signal=USR1@90`` sends
  before the time limit, and submitit's launcher's signal) stop it the same way, and then
  :func:`requeue` puts the job back in the queue: through the handler that had the signal
  before us (submitit's, for a job of a sweep), else with ``scontrol requeue <job>``.
- **The record.** A new run started in a SLURM job records the job's id in
  ``<run>/.hydra/slurm.json`` (:func:`trainer_run.runs.slurm_record.record`).
- **The restart.** A requeued job runs its command again, with ``SLURM_RESTART_COUNT`` set.
  When that command starts a run (it names no ``resume=``), :func:`continued` finds the run
  this job started (the ``hydra.run.dir`` the command names, or with none the run of this job
  among those of the default pattern ``runs/<date>/<time>``) and turns the command into its
  resume: from the latest checkpoint, bit for bit, or from iteration 0 when the run stopped
  before its first. A folder holding another job's run is refused, as without SLURM. A job
  of a sweep continues in its folder as any sweep run again does (:mod:`.sweep_job`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from trainer_run import stop_signals
from trainer_run.compose import argv as args
from trainer_run.compose.options import root_config
from trainer_run.console import last_said, say, warn
from trainer_run.runs import directory as run_directory
from trainer_run.runs.slurm_record import job_id, recorded_job


def restarts() -> int:
    """How many times SLURM has requeued this job (``SLURM_RESTART_COUNT``; 0 outside SLURM)."""
    count = os.environ.get("SLURM_RESTART_COUNT", "0")
    return int(count) if count.isdigit() else 0


def continued(argv: list[str]) -> list[str]:
    """``argv`` of a single run, with ``resume=<run>`` added when this is a requeued SLURM job
    and the run it started is found (see the module docstring); else ``argv`` unchanged."""
    if job_id() is None or restarts() == 0 or not args.is_null(args.value(argv, "resume")):
        return argv
    given = args.value(argv, "hydra.run.dir")
    candidates = [Path(given).expanduser()] if given else _default_runs()
    for run in candidates:
        if run_directory.is_run(run) and recorded_job(run) == job_id():
            say(f"SLURM job {job_id()} was requeued (restart {restarts()}): continuing its run "
                f"in {run}")
            return args.with_overrides(argv, f"resume={args.quote(run.resolve())}")
    return argv


def _default_runs() -> list[Path]:
    """The folders the default ``hydra.run.dir`` pattern (``runs/${now:...}/${now:...}``)
    can have named, newest first."""
    pattern = str(root_config()["hydra"]["run"]["dir"])
    wildcard = re.sub(r"\$\{now:[^}]*\}", "*", pattern)
    return sorted(Path().glob(wildcard), reverse=True)


def requeue(signum: int) -> None:
    """After a run stopped with a checkpoint on ``signum``: in a SLURM job, when ``signum`` is
    a requeue signal, puts the job back in the queue (see the module docstring); a refusal
    is one warning, the run stays resumable by hand."""
    if not stop_signals.in_slurm_job() or signum not in stop_signals.REQUEUE:
        return
    name = signal.Signals(signum).name
    theirs = stop_signals.earlier(signum)
    if theirs is not None:  # submitit's: it requeues the job of a sweep and exits
        try:
            theirs(signum, None)
        except Exception as e:  # noqa: BLE001 (submitit declines: "timed-out too many times")
            warn(f"{name}: submitit did not requeue the job ({e}); run the sweep again to "
                 "continue it (hydra.launcher.max_num_timeout: how often a job may be requeued "
                 "at its time limit)")
        return
    try:
        done = subprocess.run(["scontrol", "requeue", job_id()], capture_output=True, text=True)
    except OSError as e:
        done = subprocess.CompletedProcess([], 1, "", f"scontrol: {e.strerror or e}")
    if done.returncode == 0:
        say(f"{name}: SLURM job {job_id()} requeued; it continues from this checkpoint when it "
            "starts again")
        return
    said = last_said(done)
    warn(f"{name}: SLURM did not requeue job {job_id()} ({said}); submit it with --requeue, "
         "or resume the run by hand")
