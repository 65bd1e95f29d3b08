"""Before a sweep goes to SLURM (``hydra/launcher=submitit_slurm``, or a launcher config of the
user's that extends it: ``--config-dir DIR`` with ``DIR/hydra/launcher/<name>.yaml`` listing
``submitit_slurm`` in its defaults): the scheduler answers and the partition exists, so a
cluster that is down or a mistyped partition is one line before anything is submitted or
written, not a traceback from ``sbatch`` after the sweep folder is made."""

from __future__ import annotations

import shutil
import subprocess

import yaml

from trainer_run.compose import argv as args
from trainer_run.console import last_said
from trainer_run.errors import ConfigError
from trainer_run.storage import yaml_files

TIMEOUT_S = 30


def check(argv: list[str]) -> None:
    """Refuses (ConfigError) a sweep to SLURM when ``sinfo`` is missing, SLURM does
    not answer, or ``hydra.launcher.partition`` names no partition of the cluster."""
    launcher = slurm_launcher(argv)
    if launcher is None:
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
        said = last_said(done)
        raise ConfigError(f"SLURM does not answer ({said}): is slurmctld running? sinfo shows "
                          f"the cluster when it is")
    partitions = [p.rstrip("*") for p in done.stdout.split()]
    partition = args.value(argv, "hydra.launcher.partition") or launcher.get("partition")
    if partition and not args.is_null(partition) and partition not in partitions:
        raise ConfigError(f"hydra.launcher.partition={partition} is not a partition of this "
                          f"cluster; sinfo lists {', '.join(partitions) or 'none'}")


def slurm_launcher(argv: list[str]) -> dict | None:
    """The launcher config the command chooses when it submits to SLURM (``{}`` for
    ``submitit_slurm`` itself, the file's values for a config of the user's extending it),
    else None."""
    choice = args.value(argv, "hydra/launcher")
    if choice == "submitit_slurm":
        return {}
    for folder in args.config_dirs(argv) if choice else []:
        try:
            config = yaml_files.read(folder / "hydra" / "launcher" / f"{choice}.yaml")
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if isinstance(config, dict) and "submitit_slurm" in (config.get("defaults") or []):
            return config
    return None
