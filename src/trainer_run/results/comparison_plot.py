"""The comparison plot of ``trainer-report``: each run's (or seed group's) objective curve on
one set of axes (the curves: :mod:`.curves`).

:func:`figure` renders the curves with matplotlib's Agg canvas (``pip install
"trainer-run[plot]"``), never through pyplot, so a user's backend is left as it is;
:func:`draw` writes it as a PNG. The legend is always whole: inside the axes when it is short
(:func:`legend_inside`), else beside them with the figure widened (and made taller) to hold
it, its labels wrapped (:func:`wrapped`).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from ..storage.files import write_atomic
from .curves import Curve

SIZE = (9.0, 5.0)  # inches, at DPI: a 900 x 500 PNG when the legend fits inside the axes
DPI = 100
COLORS = 10  # matplotlib's default colour cycle
STYLES = ("-", "--", ":", "-.")
LEGEND_INSIDE = 8
"""At most this many entries, none wrapped, go inside the axes; more go beside them."""
LABEL_WIDTH = 40
"""The characters of a legend line; a longer label wraps onto more lines."""
MARGINS = {"left": 1.0, "right": 0.25, "bottom": 0.6, "top": 0.45, "gap": 0.15}
"""Inches around the axes (``top`` holds one title line; each more adds :data:`LINE`)."""
LINE = 0.22
BAND_ALPHA = 0.2


def title(name: str, mode: str, made: list[Curve]) -> str:
    """The plot's title: the metric and its mode, what the dots are, and for lines of
    several seeds what the line and its band are."""
    text = f"{name} ({mode}); dots: each line's best"
    if any(curve.seeds > 1 for curve in made):
        text += "\nline: mean over the seeds; band: their lowest to highest"
    return text


def wrapped(label: str, width: int = LABEL_WIDTH) -> str:
    """``label`` on lines of at most ``width`` characters, broken at spaces (a longer word is
    broken inside)."""
    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False)) or label


def legend_inside(labels: list[str]) -> bool:
    """Whether the legend goes inside the axes: at most :data:`LEGEND_INSIDE` entries, each
    on one line."""
    return len(labels) <= LEGEND_INSIDE and all(len(label) <= LABEL_WIDTH for label in labels)


def figure(made: list[Curve], name: str, mode: str):
    """The figure of the curves: one line per curve (a band for a seed group), its best point
    marked, the title (:func:`title`), a log y axis when the values span two decades or
    more, and the legend whole (:func:`legend_inside`). Raises ImportError without
    matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    made_figure = Figure(figsize=SIZE, dpi=DPI)
    FigureCanvasAgg(made_figure)
    axes = made_figure.add_subplot()
    for i, curve in enumerate(made):
        _line(axes, curve, STYLES[i // COLORS % len(STYLES)])  # past the ten colours, another dash
    text = title(name, mode, made)
    axes.set_title(text)
    axes.set_xlabel("iteration")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    axes.set_ylabel(name)
    axes.grid(True, alpha=0.3)
    if _spans_decades([v for curve in made for v in curve.values]):
        axes.set_yscale("log")
    labels = [curve.label if curve.values else f"{curve.label} (no values)" for curve in made]
    _legend(made_figure, axes, labels, text.count("\n") + 1)
    return made_figure


def draw(made: list[Curve], name: str, mode: str, path: Path) -> None:
    """Writes :func:`figure` as a PNG at ``path`` (atomically). Raises ImportError without
    matplotlib, StorageError if the disk refuses."""
    drawn = figure(made, name, mode)
    write_atomic(path, drawn.canvas.print_png)


def _line(axes, curve: Curve, style: str) -> None:
    (line,) = axes.plot(curve.iterations, curve.values, style, linewidth=1.5)
    if curve.low is not None:
        axes.fill_between(curve.iterations, curve.low, curve.high, color=line.get_color(),
                          alpha=BAND_ALPHA, linewidth=0)
    if curve.best is not None:
        axes.plot(*curve.best, marker="o", markersize=6, color=line.get_color(),
                  markeredgecolor="black", linestyle="none")


def _legend(made_figure, axes, labels: list[str], title_lines: int) -> None:
    """Places the legend inside the axes, or beside them with the figure resized so the axes
    keep their size and the legend shows whole."""
    lines = [line for line in axes.get_lines() if line.get_linestyle() != "None"]
    inside = legend_inside(labels)
    top = MARGINS["top"] + LINE * (title_lines - 1)
    width, height = SIZE
    if inside:
        axes.legend(lines, labels, fontsize="small")
    else:
        legend = axes.legend(lines, [wrapped(label) for label in labels], loc="upper left",
                             bbox_to_anchor=(1.0, 1.0), fontsize="x-small", frameon=False,
                             borderaxespad=0.0)
        box = legend.get_window_extent(made_figure.canvas.get_renderer())
        width += box.width / DPI + MARGINS["gap"]
        height = max(height, box.height / DPI + top + MARGINS["bottom"])
    made_figure.set_size_inches(width, height)
    axes_width = SIZE[0] - MARGINS["left"] - MARGINS["right"]
    made_figure.subplots_adjust(left=MARGINS["left"] / width,
                                right=(MARGINS["left"] + axes_width) / width,
                                bottom=MARGINS["bottom"] / height, top=1 - top / height)
    if not inside:
        axes.get_legend().set_bbox_to_anchor((1.0 + MARGINS["gap"] / axes_width, 1.0))


def _spans_decades(values: list[float]) -> bool:
    finite = [v for v in values if math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) >= 100
