"""A run's SLURM record: the id of the SLURM job that started it, in ``<run>/.hydra/slurm.json``,
by which a requeued job finds its run again (:mod:`trainer_run.runner.slurm_requeue`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainer_run.storage import files, reading, run_files

RECORD = Path(run_files.RECORD) / run_files.SLURM
"""Where a run started in a SLURM job records the job's id."""


def job_id() -> str | None:
    """This SLURM job's id, or None outside SLURM."""
    return os.environ.get("SLURM_JOB_ID")


def record(folder: Path, run: Path) -> None:
    """Records in the record ``folder`` (``.hydra/``) of a new run ``run`` the id of the SLURM
    job that started it (nothing outside SLURM)."""
    if job_id() is not None:
        files.write_atomic(folder / RECORD.name, json.dumps({"job_id": job_id()}) + "\n", run=run)


def recorded_job(run: Path) -> str | None:
    """The id of the SLURM job that started the run ``run``, or None."""
    try:
        return str(json.loads(reading.read_text(run / RECORD, reading.RECORD_BYTES, run))["job_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
