"""trainer-report's comparison.png (results/curves.py, results/comparison_plot.py): runs that
differ only by seed are one line, their mean, with a band from their lowest to their highest
value and "n seeds" in the legend; the legend is whole, inside the axes when short, else
beside them with the figure widened and made taller to hold it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trainer_run import results
from trainer_run.results import curves
from trainer_run.results.curves import Curve


def _row(job: str, *overrides: str) -> results.Row:
    return results.Row(job, Path(job), list(overrides), metric="val/loss", mode="min")


def _nan_equal(found: list[float], expected: list[float]) -> bool:
    return len(found) == len(expected) and all(
        (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b) for a, b in zip(found, expected))


def test_runs_that_differ_only_by_seed_are_their_mean_and_band():
    rows = [_row("0", "opt=a", "seed=0"), _row("1", "opt=b", "seed=0"), _row("2", "opt=a", "seed=1"),
            _row("3", "opt=b", "seed=1"), _row("4", "opt=c", "seed=0")]
    made = [Curve("a0", [10, 20, 30], [1.0, 0.5, 0.2]),
            Curve("b0", [10, 20, 30], [0.8, math.nan, 0.6]),
            Curve("a1", [10, 20, 30], [3.0, 0.7, 0.4]),
            Curve("b1", [10, 20], [0.6, 0.4]),  # unfinished: nothing at 30
            Curve("c0", [10, 20, 30], [0.9, 0.8, 0.7])]
    a, b, c = curves.by_seed(rows, made, "min")
    assert [a.label, b.label, c.label] == ["opt=a (2 seeds)", "opt=b (2 seeds)", "opt=c (1 seed)"]
    assert (a.iterations, a.values, a.low, a.high) == ([10, 20, 30], pytest.approx([2.0, 0.6, 0.3]),
                                                       [1.0, 0.5, 0.2], [3.0, 0.7, 0.4])
    assert a.best == (30, pytest.approx(0.3)) and a.seeds == 2
    # a NaN breaks the line at 20, as on its own; at 30 only b0 logged
    assert _nan_equal(b.values, [0.7, math.nan, 0.6]) and _nan_equal(b.low, [0.6, math.nan, 0.6])
    assert _nan_equal(b.high, [0.8, math.nan, 0.6]) and b.best == (30, 0.6)
    assert (c.values, c.low, c.high, c.seeds) == ([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], [0.9, 0.8, 0.7], 1)


def test_without_seed_groups_each_run_is_its_own_line_and_seeds_alone_make_one():
    rows = [_row("0", "opt=a"), _row("1", "opt=b")]
    made = [Curve("opt=a", [10], [1.0]), Curve("opt=b", [10], [2.0])]
    assert curves.by_seed(rows, made, "min") is made
    alone = [_row(str(s), f"seed={s}") for s in range(3)]
    line, = curves.by_seed(alone, [Curve(str(s), [10], [float(s)]) for s in range(3)], "max")
    assert line.label == "3 seeds" and line.values == [1.0] and line.best == (10, 1.0)


def test_the_title_says_what_a_line_and_a_band_are():
    from trainer_run.results import comparison_plot

    single = [Curve("x", [10], [1.0])]
    grouped = [Curve("x (2 seeds)", [10], [1.0], low=[0.5], high=[1.5], seeds=2)]
    assert comparison_plot.title("val/loss", "min", single) == "val/loss (min); dots: each line's best"
    assert comparison_plot.title("val/loss", "min", grouped) == (
        "val/loss (min); dots: each line's best\nline: mean over the seeds; band: their lowest to highest")
    assert comparison_plot.wrapped("learning_rate=0.01238 wd=6.023e-05 batch_size=32") == (
        "learning_rate=0.01238 wd=6.023e-05\nbatch_size=32")
    assert comparison_plot.legend_inside(["a"] * 8) and not comparison_plot.legend_inside(["a"] * 9)
    assert not comparison_plot.legend_inside(["x" * 41])


def _inside(inner, outer) -> bool:
    return (inner.x0 >= outer.x0 - 0.5 and inner.y0 >= outer.y0 - 0.5
            and inner.x1 <= outer.x1 + 0.5 and inner.y1 <= outer.y1 + 0.5)


@pytest.mark.parametrize("count, label", [(3, "lr={}"),
                                          (30, "learning_rate=0.0{} wd=0.000{} batch_size=128")])
def test_the_legend_is_whole_inside_the_figure(count, label):
    pytest.importorskip("matplotlib")
    from trainer_run.results import comparison_plot

    made = [Curve(label.format(i, i), [10, 20], [1.0 / (i + 1), 0.5 / (i + 1)]) for i in range(count)]
    figure = comparison_plot.figure(made, "val/loss", "min")
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    legend = axes.get_legend()
    assert len(legend.get_texts()) == count
    assert _inside(legend.get_window_extent(renderer), figure.bbox)
    axes_inches = axes.get_position().width * figure.get_figwidth()
    assert axes_inches == pytest.approx(comparison_plot.SIZE[0] - comparison_plot.MARGINS["left"]
                                        - comparison_plot.MARGINS["right"])
    if count == 3:  # short: inside the axes, the figure at its size
        assert tuple(figure.get_size_inches()) == comparison_plot.SIZE
        assert _inside(legend.get_window_extent(renderer), axes.get_window_extent(renderer))
    else:  # beside the axes: wider, and taller for 30 two-line entries
        width, height = comparison_plot.SIZE
        assert figure.get_figwidth() > width and figure.get_figheight() > height
        assert legend.get_window_extent(renderer).x0 > axes.get_window_extent(renderer).x1
