"""A job of a sweep (``trainer-run -m``): the value it gives the sweeper, what a failure
leaves, and how the same sweep, run again into its folder, continues.

- **Value.** A job returns its best objective value (a diverged one too: its best checkpoint
  is as good as that value says). One that never evaluated, or failed, returns the worst
  value there is (``inf`` for ``objective.mode=min``, ``-inf`` for ``max``):
  every sweeper can rank it, where a NaN or an exception would stop an Optuna study (its
  sweeper's default ``max_failure_rate`` is 0).
- **Failure.** A job that cannot run (this combination's config is invalid, its folder holds
  another job's run) or stops on an error (the user's code raises, the disk is full, the loss
  diverges) prints one ``error:`` line naming the job, records the line in its folder's
  ``summary.json`` (``"error"``; ``status`` ``failed`` unless the run said otherwise) and the
  sweep goes on with the next job.
- **Continuing.** Running a sweep again with ``hydra.sweep.dir=<its folder>`` runs each job
  into the same numbered folder. A folder holding a run of the same overrides is skipped when
  that run finished (``completed``, ``diverged``: its recorded value is returned), resumed from
  its latest checkpoint when it did not (``interrupted``, ``failed``, or killed), and started
  again when it has no checkpoint. A folder holding a run of other overrides is left as it is
  and the job fails: only the same job continues a run.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from yaml import YAMLError

from trainer_run.console import inform, warn
from trainer_run.data import description as data_description
from trainer_run.errors import ConfigError, Diverged, JobFailed
from trainer_run.runs import directory as run_directory
from trainer_run.runs import summary as run_summary
from trainer_run.storage import checkpoint, run_files, yaml_files
from trainer_run.training import Trainer

from .failure import fail_line

FINISHED = ("completed", "diverged")
FAILED: list[int] = []
"""The numbers of this process's jobs that failed, whether or not their folder could record it
(a folder in use by another process, or holding a run of other overrides): the end of the
sweep exits 1 when there is any (:func:`.sweeps.report`)."""
RUN_FILES = (*run_directory.MARKERS, *data_description.FILES, run_files.MODEL, run_files.BEST_MODEL)


def sweeping() -> bool:
    """Whether this job is one of a sweep (``-m``)."""
    return HydraConfig.get().mode == RunMode.MULTIRUN


def worst(mode) -> float:
    return -math.inf if mode == "max" else math.inf


def value(role) -> float | None:
    """The finished job's best objective value, or the worst for a run that never evaluated
    (None for a ``dist_async`` server, which has no objective)."""
    if not isinstance(role, Trainer):
        return None
    objective = role.get_extension("objective")
    return objective.best if objective.best is not None else worst(objective.mode)


def failed(out: Path, cfg: DictConfig, overrides: list[str], error: JobFailed | str) -> float:
    """Prints and records a failed job (see the module docstring); returns the worst value."""
    message = str(error)
    if getattr(error, "exit_code", None) != Diverged.exit_code:  # a diverged job is a result
        FAILED.append(HydraConfig.get().job.num)
    fail_line(f"job {HydraConfig.get().job.num} ({' '.join(overrides) or 'no overrides'}): "
              f"{message}")
    mode = OmegaConf.select(cfg, "objective.mode", default="min")
    if not getattr(error, "record", True) or not out.is_dir():
        return worst(mode)
    summary = _summary(out) or {
        "iteration": 0, "elapsed_s": 0.0, "status": "failed", "stop_reason": "failed",
        "overrides": overrides,
        "objective": {"metric": OmegaConf.select(cfg, "objective.metric"), "mode": mode,
                      "best": None, "best_iteration": None, "final": None}}
    if summary.get("status") not in ("diverged", "failed"):
        summary["status"] = summary["stop_reason"] = "failed"
    summary["error"] = message
    run_summary.write(out, summary)
    best = (summary.get("objective") or {}).get("best")
    return best if summary["status"] == "diverged" and best is not None else worst(mode)


def continued(cfg: DictConfig, out: Path, overrides: list[str]) -> tuple[DictConfig, float | None]:
    """For a job folder that already holds a run: this job's config (resuming that run, or
    starting again in the emptied folder) and None, or the finished run's value to return."""
    summary = _summary(out)
    before = summary.get("overrides") if summary else _recorded_overrides(out)
    num = HydraConfig.get().job.num
    if before != overrides:
        raise JobFailed(f"{out} holds a run of other overrides ({' '.join(before or []) or 'none'});"
                        " a sweep continues in its folder only with the same command; choose "
                        "another hydra.sweep.dir for a different sweep", record=False)
    status = summary.get("status") if summary else None
    if status in FINISHED:
        goal = summary.get("objective") or {}
        best = goal.get("best")
        inform(f"job {num}: already {status} in {out}; skipped")
        return cfg, best if best is not None else worst(goal.get("mode"))
    try:
        found = checkpoint.find(out, report=warn, require=checkpoint.RUN_STATE)
    except ConfigError:
        _clear(out)
        inform(f"job {num}: {out} has no checkpoint to resume; starting it again")
        return cfg, None
    inform(f"job {num}: resuming {found}")
    cfg = cfg.copy()
    OmegaConf.update(cfg, "resume", str(found))
    return cfg, None


def _summary(out: Path) -> dict | None:
    try:
        return run_summary.recorded(out) or None
    except ConfigError:  # refused: a link, a device, a file too large
        return None


def _recorded_overrides(out: Path) -> list[str] | None:
    try:
        return [str(o) for o in yaml_files.read_run(out / run_files.RECORD / run_files.OVERRIDES, out)]
    except (OSError, ValueError, TypeError, YAMLError):
        return None


def _clear(out: Path) -> None:
    """Removes a run's files from its folder (a job that starts again)."""
    for name in RUN_FILES:
        path = out / name
        if path.is_dir() and not path.is_symlink():  # a link is removed, not followed
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
