"""The curves of ``trainer-report``'s comparison plot: each run's objective by iteration, and
runs that differ only by seed combined into one line with a band.

:func:`curves` reads, from each run's ``metrics.jsonl``, the values of one metric (the
objective most runs rank by, :func:`metric`) against the iteration: every logged row that
has the metric (a ``val/`` metric's evaluation rows, a ``train/`` metric's every row), a
``null`` (NaN or infinite) as NaN, which breaks the line. A value is what the log recorded:
with evaluations more frequent than log rows, their mean since the previous row.
:func:`by_seed` replaces the runs of each seed group (:func:`.runs.seed_groups`) by their
mean and min-max band (:func:`combine`). Nothing here draws: :mod:`.plot` does.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainer_run.storage import run_files

from ..errors import ConfigError
from ..storage import reading, yaml_files
from . import runs as results


@dataclass
class Curve:
    """One line of the plot: values of the plotted metric by iteration, and its best point
    (iteration, value): the line's best in the metric's mode, the first of equals. A line of
    ``seeds`` runs (more than one) is their mean, with ``low`` and ``high`` the smallest and
    largest of them at each iteration (None for a single run)."""

    label: str
    iterations: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    best: tuple[int, float] | None = None
    low: list[float] | None = None
    high: list[float] | None = None
    seeds: int = 1


def objective(row: results.Row) -> tuple[str | None, str]:
    """The run's objective (metric, mode): its summary's, else its saved config's (an
    unfinished run), else (None, "min")."""
    if row.metric:
        return row.metric, row.mode or "min"
    config = row.path / run_files.RECORD / run_files.CONFIG
    try:
        found = yaml_files.read_run(config, row.path).get("objective") or {}
        return found.get("metric"), found.get("mode") or "min"
    except Exception:  # no config, or not one of ours: nothing to plot by
        return None, "min"


def metric(rows: list[results.Row]) -> tuple[str | None, str]:
    """The (metric, mode) the most runs rank by (the first run's among equals)."""
    found = [objective(row) for row in rows]
    found = [pair for pair in found if pair[0]]
    return max(found, key=found.count) if found else (None, "min")


def curves(rows: list[results.Row], name: str, mode: str,
           report: Callable[[str], None] = lambda message: None) -> list[Curve]:
    """Each run's curve of metric ``name`` (better in ``mode``), labelled by
    :func:`results.labels`, in the rows' order; a run that never logged it has no points.
    Raises ConfigError naming a ``metrics.jsonl`` that cannot be read or parsed; a torn last
    line is left out and told to ``report`` (:func:`read_log`)."""
    made = []
    for row, label in zip(rows, results.labels(rows)):
        curve = Curve(label)
        for line in read_log(row.path / run_files.METRICS, report):
            if name in line:
                value = line[name]
                curve.iterations.append(line.get("iteration"))
                curve.values.append(math.nan if value is None else float(value))
        curve.best = best(curve, mode)
        made.append(curve)
    return made


def by_seed(rows: list[results.Row], made: list[Curve], mode: str) -> list[Curve]:
    """The curves ``made`` (one per row, as :func:`curves` gives them) with the runs of each
    seed group (:func:`.runs.seed_groups`) combined into one (:func:`combine`), labelled by
    the overrides that differ between the groups and ``(n seeds)``, in order of each group's
    first run; ``made`` itself when no runs differ only by seed."""
    groups = results.seed_groups(rows)
    if not groups:
        return made
    by_row = {id(row): curve for row, curve in zip(rows, made)}
    names = results.labels([members[0] for members in groups], without=("seed",))
    return [combine([by_row[id(row)] for row in members], _label(name, len(members), len(groups)),
                    mode) for name, members in zip(names, groups)]


def _label(name: str, count: int, groups: int) -> str:
    """``<name> (n seeds)``, or ``n seeds`` alone when the seed is all that varies."""
    seeds = f"{count} seed" + ("s" if count != 1 else "")
    return f"{name} ({seeds})" if groups > 1 else seeds


def combine(members: list[Curve], label: str, mode: str) -> Curve:
    """One curve for several runs of one configuration: at each iteration any of them logged,
    the mean, smallest and largest of the values logged there (NaN when one of them is NaN:
    a diverged run breaks the line, as on its own); its best point is the mean's."""
    steps = sorted({i for curve in members for i in curve.iterations})
    at = [dict(zip(curve.iterations, curve.values)) for curve in members]
    made = Curve(label, steps, [], low=[], high=[], seeds=len(members))
    for step in steps:
        values = [logged[step] for logged in at if step in logged]
        whole = not any(math.isnan(v) for v in values)
        made.values.append(statistics.fmean(values) if whole else math.nan)
        made.low.append(min(values) if whole else math.nan)
        made.high.append(max(values) if whole else math.nan)
    made.best = best(made, mode)
    return made


def best(curve: Curve, mode: str) -> tuple[int, float] | None:
    """The curve's best point (iteration, value) in ``mode``, the first of equals; None
    without a value."""
    points = [(v, i) for i, v in zip(curve.iterations, curve.values) if not math.isnan(v)]
    if not points:
        return None
    value, iteration = (max if mode == "max" else min)(points, key=lambda p: p[0])
    return iteration, value


def read_log(path: Path, report: Callable[[str], None] = lambda message: None) -> list[dict]:
    """The rows of a ``metrics.jsonl`` ([] when there is none). An unterminated last line
    that does not parse (a run killed, or a disk that filled, while writing it) is left out
    and told to ``report``; any other line that is not a JSON object with a numeric
    ``iteration`` raises ConfigError naming the file and the line."""
    try:
        exists = path.exists() or path.is_symlink()
        text = reading.read_text(path, reading.METRICS_BYTES, path.parent) if exists else ""
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines):  # no newline after it: cut short, not corrupt
                report(f"{path} line {number} was cut short while being written; left out")
                break
            raise ConfigError(f"{path} is not valid JSON lines: line {number} column {e.colno}: "
                              f"{e.msg}") from None
        if not isinstance(row, dict) or not isinstance(row.get("iteration"), int):
            raise ConfigError(f"{path} line {number} is not a metrics row (a JSON object "
                              "with an integer iteration)")
        rows.append(row)
    return rows
