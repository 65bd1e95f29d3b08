"""Before a sweep goes to SLURM (``hydra/launcher=submitit_slurm``): the scheduler answers and
the partition exists, so a cluster that is down or a mistyped partition is one line before
anything is submitted or written, not a traceback from ``sbatch`` after the sweep folder is
made."""

from __future__ import annotations

import shutil
import subprocess

from trainer_run.errors import ConfigError

from . import argv as args

TIMEOUT_S = 30


def check(argv: list[str]) -> None:
    """Refuses (ConfigError) a ``submitit_slurm`` sweep when ``sinfo`` is missing, SLURM does
    not answer, or ``hydra.launcher.partition`` names no partition of the cluster."""
    if args.value(argv, "hydra/launcher") != "submitit_slurm":
        return
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        raise ConfigError("hydra/launcher=submitit_slurm submits with SLURM's commands (sinfo, "
                          "sbatch), and none is on PATH: run it on a machine of the cluster")
    try:
        done = subprocess.run([sinfo, "-h", "-o", "%P"], capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"SLURM did not answer sinfo within {TIMEOUT_S} s: is slurmctld "
                          f"running?") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ConfigError(f"SLURM does not answer ({said}): is slurmctld running? sinfo shows "
                          f"the cluster when it is")
    partitions = [p.rstrip("*") for p in done.stdout.split()]
    partition = args.value(argv, "hydra.launcher.partition")
    if partition and not args.is_null(partition) and partition not in partitions:
        raise ConfigError(f"hydra.launcher.partition={partition} is not a partition of this "
                          f"cluster; sinfo lists {', '.join(partitions) or 'none'}")
