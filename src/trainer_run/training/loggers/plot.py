"""``plot.png``: the run's curves against iteration, drawn with matplotlib's Agg canvas."""

from __future__ import annotations

import math
import numbers
from pathlib import Path

from ... import files
from ...errors import ConfigError
from .base import NOT_METRICS, Logger, RunInfo

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
except ImportError:
    raise ConfigError('logger=plot needs matplotlib: pip install "trainer-run[plot]"') from None

FILE = "plot.png"
WIDTH, PANEL_HEIGHT = 8.0, 2.5
"""The figure's size in inches: WIDTH by PANEL_HEIGHT for each panel."""
NOT_DRAWN = (*NOT_METRICS, "epoch", "elapsed_s")
LOG_SCALED = ("lr", "loss_scale")
"""Panels drawn on a log scale when their values span more than a decade."""
TITLES = {"lr": "learning rate", "loss_scale": "loss scale"}


class Plot(Logger):
    """Draws ``plot.png``: one panel per metric name with its ``train/`` and ``val/`` curves
    (the losses first), one per other logged value (``loss_scale``, ...), and the learning
    rate at the bottom (it and the loss scale on a log scale when they span more than a
    decade), all against iteration. It is redrawn after each row that carries validation
    metrics and when training ends, and replaced atomically. Drawing uses a :class:`~matplotlib.figure.Figure`
    on the Agg canvas, never pyplot, so matplotlib's global backend is left as it is."""

    path: Path

    def __init__(self, dpi: int = 100, run: RunInfo | None = None):
        super().__init__(run)
        self.dpi = dpi
        self.rows: list[dict] = []

    def start(self, out: Path, rows: list[dict]) -> None:
        self.path = Path(out) / FILE
        self.rows = list(rows)

    def write(self, row: dict) -> None:
        self.rows.append(row)
        if any(key.startswith("val/") for key in row):
            self.draw()

    def close(self) -> None:
        if self.rows:
            self.draw()

    def draw(self) -> None:
        """Replaces ``plot.png`` with the rows so far."""
        panels = _panels(self.rows)
        figure = Figure(figsize=(WIDTH, PANEL_HEIGHT * len(panels)), dpi=self.dpi,
                        layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (title, keys) in zip(axes, panels):
            for key in keys:
                x, y = _points(self.rows, key)
                ax.plot(x, y, label=key, marker="o" if key.startswith("val/") else None,
                        markersize=3)
            if title in LOG_SCALED and _spans_decades(self.rows, title):
                ax.set_yscale("log")
            ax.set_title(TITLES.get(title, title), loc="left", fontsize="medium")
            ax.set_ylabel(title)
            ax.grid(alpha=0.3)
            ax.legend(loc="best", fontsize="small")
        axes[-1].set_xlabel("iteration")
        files.write_atomic(self.path, lambda f: figure.savefig(f, format="png"))


def _panels(rows: list[dict]) -> list[tuple[str, list[str]]]:
    """``(title, keys)`` per panel: the metric names (loss first), other values, then lr."""
    keys = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in NOT_DRAWN]
    names = {}
    for key in keys:
        names.setdefault(key.partition("/")[2] if "/" in key else key, []).append(key)
    order = sorted(names, key=lambda n: (n == "lr", n != "loss", "/" not in names[n][0], n))
    return [(name, sorted(names[name], key=lambda k: not k.startswith("train/"))) for name in order]


def _points(rows: list[dict], key: str) -> tuple[list, list]:
    pairs = [(row["iteration"], float(row[key])) for row in rows
             if isinstance(row.get(key), numbers.Real) and math.isfinite(row[key])]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _spans_decades(rows: list[dict], key: str) -> bool:
    values = [v for v in _points(rows, key)[1] if v > 0]
    return bool(values) and max(values) > 10 * min(values)
