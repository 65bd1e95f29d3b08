"""What plot.png shows, decided without looking at pixels (training/loggers/plot_layout.py):
the y limits that leave the first spikes out, the log axis for a loss that falls by decades,
an accuracy axis on which 98% and 99% lie apart, the learning-rate panel only when the rate
varies, the test split's values marked, and the title naming the run and its choices."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trainer_run.training.loggers import plot_layout as layout
from trainer_run.training.loggers.base import RunInfo


def _pairs(values, start=10, step=10):
    return [(start + step * i, value) for i, value in enumerate(values)]


def _axis(found: layout.Axis, scale: str, low: float, high: float) -> None:
    assert found.scale == scale
    assert (found.low, found.high) == (pytest.approx(low), pytest.approx(high))


# -- y limits -------------------------------------------------------------------------------

def test_a_first_loss_spike_is_left_above_the_limits():
    """Iterations 10..100: the first tenth ends at 19, so 20..100 set the range 1.0..2.0 (less
    than a decade: linear); 50 lies beyond 2.0 + half the range and is left out; 5% margin."""
    values = [50.0, 2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0]
    _axis(layout.y_axis(_pairs(values), layout.EARLY_LOSS, log=True), "linear", 0.95, 2.05)


def test_an_early_value_near_the_later_range_stays_inside():
    """2.4 lies within 2.0 + 0.5 (half the later range): the limits reach it (1.0..2.4, margin 0.07)."""
    values = [2.4, 2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0]
    _axis(layout.y_axis(_pairs(values), layout.EARLY_LOSS, log=True), "linear", 0.93, 2.47)


def test_a_loss_falling_by_decades_is_on_a_log_axis_in_decades():
    """Later values 1 .. 0.001 span three decades: log axis. The first, 10, is one decade
    above them, within half their range (1.5 decades): kept. Range -3..1, margin 0.2 decade."""
    values = [10.0, 1.0, 0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001]
    _axis(layout.y_axis(_pairs(values), layout.EARLY_LOSS, log=True), "log", 10 ** -3.2, 10 ** 1.2)
    spiked = [1e6, *values[1:]]  # six decades above: a spike, left out (range -3..0)
    _axis(layout.y_axis(_pairs(spiked), layout.EARLY_LOSS, log=True), "log", 10 ** -3.15, 10 ** 0.15)
    _axis(layout.y_axis(_pairs(spiked), layout.EARLY_LOSS, log=False), "linear", -0.04895, 1.04995)


def test_an_accuracy_axis_shows_the_last_percent():
    """Iterations 1..10, cut at 5.5: 0.97..0.99 from iterations 6..10 set the range (0.02);
    0.95 at 5 lies 0.02 below it, beyond half the range, so it is left out: limits
    0.969..0.991, on which 98% and 99% are 45% of the axis apart."""
    values = [0.1, 0.5, 0.8, 0.9, 0.95, 0.97, 0.98, 0.985, 0.99, 0.99]
    found = layout.y_axis(_pairs(values, start=1, step=1), layout.EARLY_METRIC)
    _axis(found, "linear", 0.969, 0.991)
    assert (0.99 - 0.98) / (found.high - found.low) == pytest.approx(0.01 / 0.022)


def test_few_values_flat_values_and_nan_leave_the_limits_to_matplotlib():
    assert layout.y_axis(_pairs([1.0, 0.5, 0.2]), layout.EARLY_LOSS) == layout.Axis()
    assert layout.y_axis(_pairs([3.0, 1.0, 1.0, 1.0, 1.0]), layout.EARLY_LOSS) == layout.Axis()
    values = [50.0, math.nan, 2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0]
    _axis(layout.y_axis(_pairs(values), layout.EARLY_LOSS), "linear", 0.95, 2.05)


# -- panels ---------------------------------------------------------------------------------

def _rows(lrs, **series):
    rows = [{"iteration": 10 * (i + 1), "epoch": 0.1 * i, "elapsed_s": i, "lr": lr}
            for i, lr in enumerate(lrs)]
    for key, values in series.items():
        for row, value in zip(rows, values):
            if value is not None:
                row[key.replace("__", "/")] = value
    return rows


def test_the_learning_rate_panel_is_there_only_when_the_rate_varies():
    losses = [1.0, 0.5, 0.4, 0.3]
    constant = layout.panels(_rows([0.1] * 4, train__loss=losses))
    assert [(p.name, p.keys) for p in constant] == [("loss", ["train/loss"])]
    varying = layout.panels(_rows([0.1, 0.1, 0.05, 0.05], train__loss=losses))
    assert [p.name for p in varying] == ["loss", "lr"]
    assert layout.varies([0.1, 0.1]) is False and layout.varies([]) is False


def test_metric_panels_carry_their_test_value_and_loss_comes_first():
    rows = _rows([0.1] * 4, train__accuracy=[0.5, 0.9, 0.95, 0.97],
                 val__accuracy=[None, 0.9, None, 0.96], train__loss=[1.0, 0.5, 0.4, 0.3],
                 val__loss=[None, 0.6, None, 0.45], loss_scale=[8.0, 8.0, 16.0, 16.0])
    tested = {"test/accuracy": 0.95, "test/loss": 0.5, "test/top5": 0.99, "test/nan": math.nan}
    found = layout.panels(rows, tested)
    assert [(p.name, p.keys, p.metric, p.tested) for p in found] == [
        ("loss", ["train/loss", "val/loss"], True, {"test/loss": 0.5}),
        ("accuracy", ["train/accuracy", "val/accuracy"], True, {"test/accuracy": 0.95}),
        ("loss_scale", ["loss_scale"], False, {})]


def test_the_test_value_is_inside_the_accuracy_limits():
    """Second half (iterations 30, 40): 0.96..0.97, and the test value 0.92 at the last
    iteration: 0.92..0.97; 0.9 at 20 is within half that range of it, 0.5 at 10 is not."""
    rows = _rows([0.1] * 4, train__accuracy=[0.5, 0.9, 0.96, 0.97])
    panel, = layout.panels(rows, {"test/accuracy": 0.92})
    _axis(layout.axis(panel, rows), "linear", 0.9 - 0.0035, 0.97 + 0.0035)


def test_the_learning_rate_is_on_a_log_axis_when_it_spans_decades():
    rows = _rows([0.1, 0.01, 0.001, 0.0001], train__loss=[1.0, 0.5, 0.4, 0.3])
    assert layout.axis(layout.panels(rows)[-1], rows) == layout.Axis("log")
    rows = _rows([0.1, 0.08, 0.05, 0.02], train__loss=[1.0, 0.5, 0.4, 0.3])
    assert layout.axis(layout.panels(rows)[-1], rows) == layout.Axis()


# -- title ----------------------------------------------------------------------------------

CONFIG = {"model": {"_target_": "trainer_run.models.MLP", "hidden_sizes": [64]},
          "dataset": {"_target_": "trainer_run.data.array_files.npz", "path": "data/digits.npz"},
          "optimizer": {"_target_": "trainer_run.optimizers.SGD", "learning_rate": 0.1},
          "scheduler": {"_target_": "trainer_run.schedulers.CosineScheduler", "base_lr": 0.1},
          "seed": 3}


def test_the_title_names_the_run_and_its_main_choices():
    out = Path("/home/me/runs/2026-11-21/10-53-00")
    assert layout.title(out, CONFIG) == ("2026-11-21/10-53-00\n"
                                         "MLP on digits.npz, SGD lr=0.1, cosine schedule, seed 3")
    plain = {**CONFIG, "dataset": {"_target_": "trainer_run.data.spirals"},
             "scheduler": {"_target_": "trainer_run.schedulers.ConstantScheduler", "base_lr": 0.1}}
    assert layout.title(Path("sweep/3"), plain) == "sweep/3\nMLP on spirals, SGD lr=0.1, seed 3"
    assert layout.title(out, {}) == "2026-11-21/10-53-00"


# -- the figure -----------------------------------------------------------------------------

def test_the_test_values_go_where_the_weights_they_measured_were():
    assert layout.test_point({"checkpoint": "best", "iteration": 30}, 40) == (30, " (best weights)")
    assert layout.test_point({"checkpoint": "last", "iteration": 40}, 40) == (40, "")
    assert layout.test_point({}, 40) == (40, "")
    ema = {"checkpoint": "best", "iteration": 30, "averaged": "ema"}  # the objective ranks the EMA's
    assert layout.test_point(ema, 40) == (30, " (best EMA weights)")


class _HeldOut:
    metrics = {"test/loss": 0.35, "test/accuracy": 0.955}
    weights = {"checkpoint": "best", "iteration": 30}


def test_the_figure_marks_the_test_values_at_the_best_weights_iteration(tmp_path):
    pytest.importorskip("matplotlib")
    from trainer_run.training.loggers.plot import Plot

    rows = _rows([0.1] * 4, train__accuracy=[0.5, 0.9, 0.96, 0.97], train__loss=[1.0, 0.5, 0.4, 0.3])
    plot = Plot(run=RunInfo(CONFIG, None, _HeldOut()))
    plot.start(tmp_path / "runs" / "2026-11-21" / "10-53-00", rows)
    figure = plot.figure()
    assert figure.get_suptitle() == layout.title(tmp_path / "runs/2026-11-21/10-53-00", CONFIG)
    loss, accuracy = figure.axes  # the rate is constant: no third panel
    for axes, key, value in ((loss, "test/loss", 0.35), (accuracy, "test/accuracy", 0.955)):
        marker, = [line for line in axes.get_lines() if line.get_label().startswith("test/")]
        assert marker.get_label() == f"{key} {value} (best weights)"
        assert (list(marker.get_xdata()), list(marker.get_ydata())) == ([30], [value])
    # loss: 0.3..0.5 with the test's 0.35 after the first tenth, 1.0 a spike: margin 0.01;
    # accuracy: the second half's 0.96, 0.97 and the test's 0.955, margin 0.00075
    assert loss.get_ylim() == pytest.approx((0.29, 0.51))
    assert accuracy.get_ylim() == pytest.approx((0.95425, 0.97075))


def test_averaged_weights_share_their_metrics_panel_and_a_family_of_values_shares_one():
    rows = [{"iteration": i, "lr": 0.1, "train/loss": 1.0 / i, "val/loss": 1.1 / i,
             "val/ema/loss": 1.05 / i, "val/swa/accuracy": 0.5, "val/accuracy": 0.4,
             "val/recall/cat": 0.3, "val/recall/dog": 0.6, "val/ema/recall/cat": 0.2,
             "loss_scale": 8.0} for i in range(1, 5)]
    panels = {p.name: p.keys for p in layout.panels(rows)}
    assert list(panels) == ["loss", "accuracy", "recall", "loss_scale"]
    assert panels["loss"] == ["train/loss", "val/loss", "val/ema/loss"]
    assert panels["accuracy"] == ["val/accuracy", "val/swa/accuracy"]
    assert panels["recall"] == ["val/recall/cat", "val/recall/dog", "val/ema/recall/cat"]
