"""Run folders read into rows: one :class:`Row` per run, from its ``summary.json``.

A *run folder* holds a ``summary.json``, or (an *unfinished* run, killed or still running) one
of ``checkpoints/``, ``metrics.jsonl``, ``.hydra/``. A *sweep folder* holds run folders as its
immediate subfolders (``0``, ``1``, ... sorted numerically). A summary that cannot be parsed
is refused (ConfigError naming it); a value of the wrong type in its ``objective`` (a ``best``
that is a string or a list) is shown blank and told to ``report`` naming the file.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from trainer_run.runs import directory as run_directory
from trainer_run.runs import summary as run_summary
from trainer_run.storage import run_files

from ..errors import ConfigError
from ..storage import yaml_files

NOT_A_RUN = "is not a run folder (it has no summary.json, checkpoints or .hydra) nor a sweep folder of runs"
RANKED = ("completed", "diverged")
"""How a run ended for it to be ranked by its objective (a diverged one by the best it reached)."""
Report = Callable[[str], None]


@dataclass
class Row:
    """One job: its objective's best and final values, its final metrics and how it ended.
    ``status`` is the summary's stop_reason (else its status), ``unfinished`` without one;
    ``ended`` the summary's status (``completed``, ``diverged``, ``failed``, ``interrupted``),
    ``unfinished`` without one. ``sweep`` is the sweep folder the run was read from, None
    for a run folder given by itself."""

    job: str
    path: Path
    overrides: list[str] = field(default_factory=list)
    metric: str | None = None
    mode: str | None = None
    best: float | None = None
    best_iteration: int | None = None
    final: float | None = None
    metrics: dict = field(default_factory=dict)
    status: str = "unfinished"
    error: str | None = None
    elapsed_s: float | None = None
    iteration: int | None = None
    ended: str = "unfinished"
    sweep: Path | None = None

    @property
    def ranked(self) -> bool:
        """Whether the run finished (completed or diverged), so its objective ranks it."""
        return self.ended in RANKED


def collect(folders: list[Path], report: Report = lambda message: None) -> list[Row]:
    """The rows of the given run folders and sweep folders (each expanded to its runs, sorted
    numerically by name), in that order. Raises ConfigError naming a folder that is neither,
    or a summary.json that cannot be read or parsed; tells ``report`` of a value of the wrong
    type in a summary."""
    rows = []
    for folder in folders:
        folder = Path(folder)
        if is_run(folder):
            rows.append(read_run(folder, str(folder), report))
            continue
        runs = _sweep_runs(folder)
        rows += [replace(read_run(run, run.name, report), sweep=folder) for run in runs]
    return rows


def is_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run's files (:func:`trainer_run.runs.directory.holds_run`): a
    report shows a sweep's job that failed before its record was written, whose folder holds
    only the ``summary.json`` the sweep wrote for it; reading a folder is never running it."""
    return folder.is_dir() and run_directory.holds_run(folder)


def _sweep_runs(folder: Path) -> list[Path]:
    if not folder.exists():
        raise ConfigError(f"{folder} does not exist; expected a run folder or a sweep folder of runs")
    if not folder.is_dir():
        raise ConfigError(f"{folder} is a file; expected a run folder or a sweep folder of runs")
    try:
        runs = [child for child in folder.iterdir() if is_run(child)]
    except OSError as e:
        raise ConfigError(f"cannot read {folder}: {e.strerror or e}") from None
    if not runs:
        raise ConfigError(f"{folder} {NOT_A_RUN}")
    return sorted(runs, key=lambda run: (0, int(run.name), "") if run.name.isdigit() else (1, 0, run.name))


def read_run(folder: Path, job: str, report: Report = lambda message: None) -> Row:
    """The row of one run folder, labelled ``job``; ``unfinished`` when it has no summary.
    An ``objective`` that is not an object, or a ``best``, ``final`` or ``best_iteration``
    of the wrong type, is left blank and told to ``report`` naming the file."""
    summary_file = folder / run_files.SUMMARY
    if not (summary_file.exists() or summary_file.is_symlink()):
        return Row(job=job, path=folder, overrides=_hydra_overrides(folder))
    summary = run_summary.read(folder)
    objective = _objective(summary_file, summary, report)
    overrides = summary.get("overrides")
    status = summary.get("status")
    return Row(
        job=job, path=folder,
        overrides=[str(o) for o in overrides] if isinstance(overrides, list) else _hydra_overrides(folder),
        metric=objective.get("metric"), mode=objective.get("mode"),
        best=objective.get("best"), best_iteration=objective.get("best_iteration"),
        final=objective.get("final"),
        metrics={key: _number(value) for key, value in summary.items() if _is_metric(key, value)},
        status=summary.get("stop_reason") or status or "unknown",
        error=summary.get("error"), elapsed_s=summary.get("elapsed_s"), iteration=summary.get("iteration"),
        ended=status if isinstance(status, str) else "unknown")


def _objective(path: Path, summary: dict, report: Report) -> dict:
    """The summary's ``objective`` with its values checked: ``best`` and ``final`` finite
    numbers (else None), ``best_iteration`` an integer; a value of another type is None and
    one line to ``report``."""
    objective = summary.get("objective") or {}
    if not isinstance(objective, dict):
        report(f"{path} holds objective {json.dumps(objective)}, not an object; the run is "
               "shown without its objective")
        return {}
    checked = dict(objective)
    for key, fits in (("best", _is_number), ("final", _is_number), ("best_iteration", _is_integer)):
        value = objective.get(key)
        if value is not None and not fits(value):
            report(f"{path} holds objective.{key} {json.dumps(value)}, not a number; the run is "
                   f"shown without it")
            value = None
        checked[key] = _number(value) if key != "best_iteration" else value
    return checked


def _hydra_overrides(folder: Path) -> list[str]:
    path = folder / run_files.RECORD / run_files.OVERRIDES
    if not (path.is_file() or path.is_symlink()):
        return []
    try:
        overrides = yaml_files.read_run(path, folder)
        if not isinstance(overrides, list):
            raise ValueError("not a list")
        return [str(o) for o in overrides]
    except ConfigError:
        raise
    except Exception as e:  # any YAML error: the file is unusable
        raise ConfigError(f"{path} is not a YAML list of overrides: {yaml_files.problem(e)}") from None


def _is_metric(key: str, value) -> bool:
    wanted = key == "train/loss" or key.startswith(("val/", "test/"))
    return wanted and (value is None or _number(value) is not None)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _number(value):
    """``value`` when it is a finite number (not a bool), else None."""
    return value if _is_number(value) and math.isfinite(value) else None
