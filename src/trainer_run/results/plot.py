"""The comparison plot of ``trainer-report``: each run's objective curve on one set of axes.

:func:`curves` reads, from each run's ``metrics.jsonl``, the values of one metric (the
objective most runs rank by, :func:`metric`) against the iteration: every logged row that
has the metric (a ``val/`` metric's evaluation rows, a ``train/`` metric's every row), a
``null`` (NaN or infinite) as NaN, which breaks the line. A value is what the log recorded:
with evaluations more frequent than log rows, their mean since the previous row.
:func:`draw` renders the curves as a PNG with matplotlib's Agg canvas (``pip install
"trainer-run[plot]"``), never through pyplot, so a user's backend is left as it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from ..errors import ConfigError
from ..files import write_atomic
from ..training.loggers import jsonl
from . import runs as results

SIZE = (9.0, 5.0)  # inches, at DPI: a 900 x 500 PNG
DPI = 100
COLORS = 10  # matplotlib's default colour cycle
STYLES = ("-", "--", ":", "-.")
LEGEND_INSIDE = 8  # more runs than this: the legend goes right of the axes, in a smaller font


@dataclass
class Curve:
    """One run's values of the plotted metric by iteration, and its best point (iteration,
    value): the curve's best in the metric's mode, the first of equals."""

    label: str
    iterations: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    best: tuple[int, float] | None = None


def objective(row: results.Row) -> tuple[str | None, str]:
    """The run's objective (metric, mode): its summary's, else its saved config's (an
    unfinished run), else (None, "min")."""
    if row.metric:
        return row.metric, row.mode or "min"
    config = row.path / ".hydra" / "config.yaml"
    try:
        found = yaml.safe_load(config.read_text()).get("objective") or {}
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
        for line in read_log(row.path / jsonl.FILE, report):
            if name in line:
                value = line[name]
                curve.iterations.append(line.get("iteration"))
                curve.values.append(math.nan if value is None else float(value))
        curve.best = _best(curve, mode)
        made.append(curve)
    return made


def read_log(path: Path, report: Callable[[str], None] = lambda message: None) -> list[dict]:
    """The rows of a ``metrics.jsonl`` ([] when there is none). An unterminated last line
    that does not parse (a run killed, or a disk that filled, while writing it) is left out
    and told to ``report``; any other line that is not a JSON object with a numeric
    ``iteration`` raises ConfigError naming the file and the line."""
    try:
        text = path.read_text() if path.exists() else ""
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


def _best(curve: Curve, mode: str) -> tuple[int, float] | None:
    points = [(v, i) for i, v in zip(curve.iterations, curve.values) if not math.isnan(v)]
    if not points:
        return None
    value, iteration = (max if mode == "max" else min)(points, key=lambda p: p[0])
    return iteration, value


def draw(made: list[Curve], name: str, mode: str, path: Path) -> None:
    """Writes the curves as a PNG at ``path`` (atomically): one line per run, its best point
    marked, the title naming the metric, a log y axis when the values span two decades or
    more. Raises ImportError without matplotlib, StorageError if the disk refuses."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=SIZE, dpi=DPI)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for i, curve in enumerate(made):
        label = curve.label if curve.values else f"{curve.label} (no values)"
        style = STYLES[i // COLORS % len(STYLES)]  # past the ten colours, another dash
        (line,) = axes.plot(curve.iterations, curve.values, style, label=label, linewidth=1.5)
        if curve.best is not None:
            axes.plot(*curve.best, marker="o", markersize=6, color=line.get_color(),
                      markeredgecolor="black", linestyle="none")
    axes.set_title(f"{name} ({mode}; dots: each run's best)")
    axes.set_xlabel("iteration")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    axes.set_ylabel(name)
    axes.grid(True, alpha=0.3)
    if _spans_decades([v for curve in made for v in curve.values]):
        axes.set_yscale("log")
    if len(made) > LEGEND_INSIDE:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", frameon=False)
        figure.subplots_adjust(left=0.08, right=0.72)
    else:
        axes.legend(fontsize="small")
    write_atomic(path, canvas.print_png)


def _spans_decades(values: list[float]) -> bool:
    finite = [v for v in values if math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) >= 100
