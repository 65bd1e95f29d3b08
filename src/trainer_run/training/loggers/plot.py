"""``plot.png``: the run's curves against iteration, drawn with matplotlib's Agg canvas."""

from __future__ import annotations

from pathlib import Path

from trainer_run.storage import run_files

from ...errors import ConfigError
from ...storage import files
from . import plot_layout as layout
from .base import Logger, RunInfo

LEGEND_ROWS = 6
"""A legend's entries per column."""

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter
except ImportError:
    raise ConfigError('logger=plot needs matplotlib: pip install "trainer-run[plot]"') from None

FILE = run_files.PLOT
WIDTH, PANEL_HEIGHT, TITLE_HEIGHT = 8.0, 2.5, 0.6
"""The figure's size in inches: WIDTH by PANEL_HEIGHT for each panel, plus the title's."""
TITLES = {"lr": "learning rate", "loss_scale": "loss scale"}


class Plot(Logger):
    """Draws ``plot.png``: the panels :func:`.plot_layout.panels` chooses (one per metric name
    with its ``train/`` and ``val/`` curves, the losses first, one per other logged value, the
    learning rate at the bottom when it varies), each scaled by :func:`.plot_layout.axis` (a
    loss on a log axis when it spans decades, first spikes left outside the limits, an
    accuracy scaled to the second half of training), all against iteration, under a title
    naming the run and its main choices (:func:`.plot_layout.title`). When training
    completes with a test split, its ``test/<metric>`` values (``run.held_out``'s metrics)
    are marked with a star at the iteration of the weights they measured (the best
    evaluation's, else the last), labelled with their value. It is redrawn after each
    row that carries validation metrics and when training ends, and replaced atomically.
    Drawing uses a :class:`~matplotlib.figure.Figure` on the Agg canvas, never pyplot, so
    matplotlib's global backend is left as it is."""

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
        drawn = self.figure()
        files.write_atomic(self.path, lambda f: drawn.savefig(f, format="png"), run=self.path.parent)

    def figure(self) -> Figure:
        """The figure of the rows so far (see the class)."""
        held_out = self.run.held_out
        panels = layout.panels(self.rows, held_out.metrics if held_out is not None else {})
        last = max(row["iteration"] for row in self.rows)
        tested = layout.test_point(held_out.weights if held_out is not None else {}, last)
        figure = Figure(figsize=(WIDTH, PANEL_HEIGHT * len(panels) + TITLE_HEIGHT), dpi=self.dpi,
                        layout="constrained")
        FigureCanvasAgg(figure)
        figure.suptitle(layout.title(self.path.parent, self.run.config), fontsize="medium")
        axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, panel in zip(axes, panels):
            _draw_panel(ax, panel, self.rows, tested)
        axes[-1].set_xlabel("iteration")
        return figure


class PlainLog(LogFormatter):
    """Labels a log axis's ticks as matplotlib chooses them, written plainly: 0.02, not 2e-02."""

    def __call__(self, x, pos=None):
        return f"{x:g}" if super().__call__(x, pos) else ""


def _draw_panel(ax, panel: layout.Panel, rows: list[dict], tested: tuple[int, str]) -> None:
    """One panel: its curves, the test values marked (``tested``: where, and what the legend
    adds: :func:`.plot_layout.test_point`), its y axis."""
    for key in panel.keys:
        x, y = layout.points(rows, key)
        ax.plot(x, y, label=key, marker="o" if key.startswith("val/") else None, markersize=3)
    for key, value in panel.tested.items():
        ax.plot([tested[0]], [value], linestyle="none", marker="*", markersize=12, color="black",
                label=f"{key} {value:.4g}{tested[1]}")
    scale = layout.axis(panel, rows)
    ax.set_yscale(scale.scale)
    if scale.scale == "log":
        ax.yaxis.set_major_formatter(PlainLog())
        ax.yaxis.set_minor_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    if scale.low is not None:
        ax.set_ylim(scale.low, scale.high)
    ax.set_title(TITLES.get(panel.name, panel.name), loc="left", fontsize="medium")
    ax.set_ylabel(panel.name)
    ax.grid(alpha=0.3)
    curves = len(ax.get_legend_handles_labels()[1])
    ax.legend(loc="best", fontsize="small" if curves <= LEGEND_ROWS else "x-small",
              ncol=-(-curves // LEGEND_ROWS))  # a family of curves (one per class) in columns
