"""One job of the command: what Hydra composed, handed to the run's lifecycle
(:mod:`trainer_run.runner.lifecycle`), and how the command ends.

A single run that fails prints one ``error:`` line and exits with the status that says why;
an interrupted one exits with 128 + the signal's number. A job of a sweep is different
(:mod:`.sweep_job`): its failure is recorded in its folder and the sweep goes on, and a job
folder that already holds this job's run is skipped when it finished or resumed when it did
not. Each job returns the run's best objective value, which is what a Hydra sweeper optimises.
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from trainer_run.compose import user_targets
from trainer_run.errors import JobFailed
from trainer_run.runner import lifecycle
from trainer_run.runner.lifecycle import Finished, Job
from trainer_run.runs import directory as run_directory
from trainer_run.training import Trainer

from . import hosts, sweep_job, sweep_record
from .failure import fail


@dataclass
class Launch:
    """What the command decided before Hydra runs, for the job(s) it starts."""

    comm: object = None          # MPI's world communicator of a multi-process run, else None
    record: str | None = run_directory.RECORD  # where in a new run directory Hydra's record goes (None: none)
    kept: Path | None = None     # the run directory, or its nearest folder, that existed before
    resume: str | None = None    # resume= as the user gave it (a run or a checkpoint), if any
    pid: int | None = None       # the command's process; a launcher may run jobs in others


launch = Launch()
"""Set by :func:`trainer_run.cli.main.main` before Hydra runs."""


def run(cfg: DictConfig) -> float | None:
    """One job: the run's lifecycle; returns the best objective value (the worst possible one
    for a job that failed or never evaluated, see :func:`.sweep_job.value`)."""
    job = this_job()
    given = job.overrides
    cfg = user_targets.apply(cfg, given)
    if not job.sweeping:
        try:
            return _ended(lifecycle.run(job, cfg))
        except JobFailed as e:
            fail(e, e.exit_code)
    try:
        if job.rank_0:
            sweep_record.mark(Path(HydraConfig.get().sweep.dir))
        return _ended(lifecycle.run(job, cfg))
    except Finished as done:
        return done.value
    except JobFailed as e:
        return sweep_job.failed(job.out, cfg, given, e)
    except Exception as e:  # the user's code: the traceback to read, the sweep goes on
        traceback.print_exc()
        return sweep_job.failed(job.out, cfg, given, f"{type(e).__name__}: {e}")


def this_job() -> Job:
    """The job Hydra runs now, as the lifecycle takes it."""
    sweeping = sweep_job.sweeping()
    job = Job.composed(HydraConfig.get(), comm=launch.comm, record=launch.record,
                       kept=launch.kept, resume=launch.resume, command=command(launch.comm),
                       sweeping=sweeping)
    if sweeping:
        job.existing = _continued(job.overrides)
    return job


def _continued(given: list[str]):
    def existing(cfg: DictConfig, out: Path) -> DictConfig:
        cfg, done = sweep_job.continued(cfg, out, given)
        if done is not None:
            raise Finished(done)
        return cfg
    return existing


def _ended(role) -> float | None:
    """The job's value; a single run that was interrupted ends the command with 128 + the
    signal's number (a job in a launcher's process ends with its value instead)."""
    if isinstance(role, Trainer) and role.status == "interrupted" and launch.pid == os.getpid():
        sys.exit(128 + (role.stop_signal or 2))
    return sweep_job.value(role)


def command(comm) -> str:
    """The command that starts a run's processes, as its resume needs it (``comm``: MPI's
    world communicator of a multi-process run, else None)."""
    if comm is None:
        return "trainer-run"
    host_file = os.environ.get(hosts.ENV)
    if host_file:
        return f"trainer-run --hosts {shlex.quote(host_file)}"
    return f"mpiexec -n {comm.size} trainer-run"
