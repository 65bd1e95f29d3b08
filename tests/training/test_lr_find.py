"""training/lr_find.py: the range test's rules against hand computations of Lightning's
``lightning/pytorch/tuner/lr_finder.py`` (2.6, commit 7f0c343) traced step by step: the ladder
of its ``_ExponentialLR``/``_LinearLR`` (stepped once when built, then after every step), the
smoothing and early stop of its ``_LRCallback`` (``global_step`` already counts the step), the
suggestion's skips, its finite filter and its index mapping; and the one-line refusals of the
settings."""

from __future__ import annotations

import math

import pytest

from trainer_run.compose.options import option_section
from trainer_run.errors import ConfigError
from trainer_run.training import lr_find
from trainer_run.training.lr_find import Settings

LN10 = math.log(10)


def test_the_defaults_are_lightnings_and_the_configs():
    assert Settings() == Settings(min_lr=1e-8, max_lr=1, num_training=100, mode="exponential",
                                  early_stop_threshold=4.0, skip_begin=10, skip_end=1)
    section = dict(option_section("trainer", "default")["lr_find"])
    assert section.pop("enabled") is False
    assert lr_find.settings(section) == Settings()


def test_the_exponential_ladder_skips_the_rung_of_one_nth():
    # _ExponentialLR(min 1e-4, end 1, num_iter 4): built (last_epoch 0) -> base; after step k,
    # last_epoch k > 0 -> 1e-4 * (1e4) ** ((k + 1) / 4): 1e-2, 1e-1, 1
    rates = lr_find.learning_rates(Settings(min_lr=1e-4, max_lr=1.0, num_training=4,
                                            skip_begin=1, skip_end=1))
    assert rates == pytest.approx([1e-4, 1e-2, 1e-1, 1.0], rel=1e-12)


def test_the_linear_ladder():
    # _LinearLR(min 0.1, end 1, num_iter 4): 0.1, then 0.1 + (k + 1) / 4 * 0.9 for k = 1, 2, 3
    rates = lr_find.learning_rates(Settings(min_lr=0.1, max_lr=1.0, num_training=4, mode="linear",
                                            skip_begin=1, skip_end=1))
    assert rates == pytest.approx([0.1, 0.55, 0.775, 1.0], rel=1e-12)


def test_the_default_ladder_runs_from_min_lr_to_max_lr():
    rates = lr_find.learning_rates(Settings())
    assert len(rates) == 100 and rates[0] == 1e-8 and rates[-1] == pytest.approx(1.0, rel=1e-12)
    assert rates[1] == pytest.approx(1e-8 * 1e8 ** (2 / 100), rel=1e-12)


def test_the_smoothed_loss_is_lightnings_bias_corrected_average():
    # avg_k = 0.98 avg_{k-1} + 0.02 loss_k from 0; smoothed_k = avg_k / (1 - 0.98 ** (k + 1))
    smoother = lr_find.Smoother()
    got = [smoother(loss) for loss in (1.0, 2.0, 3.0)]
    assert got == pytest.approx([0.02 / 0.0396, 0.0596 / 0.058808, 0.118408 / 0.07763184], rel=1e-12)
    assert got == pytest.approx([0.505050505, 1.013467555, 1.525250464], rel=1e-9)


def test_early_stop_keeps_the_point_that_exceeds_four_times_the_best():
    test = Settings(num_training=20, skip_begin=1, skip_end=1)
    traced = lr_find.trace([1.0, 1.0, 1000.0, 1.0, 1.0], test)
    # avg: 0.02, 0.0396, 0.038808 + 20; smoothed: 0.50505 (the best), 0.67338, 258.13 > 4 * 0.50505
    assert traced.smoothed == pytest.approx([0.02 / 0.0396, 0.0396 / 0.058808,
                                             20.038808 / 0.07763184], rel=1e-12)
    assert (len(traced.rates), traced.stopped) == (3, "diverging")
    assert traced.best == pytest.approx(0.02 / 0.0396, rel=1e-12)


def test_the_second_step_may_stop_the_first_never():
    test = Settings(num_training=20, skip_begin=1, skip_end=1)
    # step 2 of [1, 10]: (0.0196 + 0.2) / 0.058808 = 3.734 > 4 * 0.50505 = 2.0202: stops there;
    # of [1, 2]: 0.0596 / 0.058808 = 1.0135 < 2.0202: goes on
    assert (len(lr_find.trace([1.0, 10.0, 1.0], test).rates), lr_find.trace([1.0, 10.0], test)
            .stopped) == (2, "diverging")
    assert lr_find.trace([1.0, 2.0, 1.5], test).stopped is None
    never = Settings(num_training=20, early_stop_threshold=None, skip_begin=1, skip_end=1)
    assert lr_find.trace([1.0, 10.0, 1000.0], never).stopped is None
    assert lr_find.trace([50.0], test).stopped is None  # the first step has no best to exceed


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_loss_ends_the_test_after_its_step(bad):
    traced = lr_find.trace([1.0, 0.9, bad, 0.5, 0.4], Settings(num_training=20, skip_begin=1,
                                                              skip_end=1))
    assert (len(traced.rates), traced.stopped) == (3, "non-finite")


# A log ladder whose smoothed losses fall a little at the tiny rates (noise) and most between
# 1e-2 and 1e-1. Slopes against ln(rate), evenly spaced by ln 10 (numpy's rule: central
# differences inside, one-sided at the ends): [-0.02, -0.015, -0.24, -0.26, -0.05] / ln 10, the
# least at index 3. Against the rate itself (Lightning 2.6's spacing=[lrs]) index 0 wins:
# (0.98 - 1) / 9e-4 = -22.2, then -20.30, -1.485, -4.753, -0.0556.
RATES = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
LOSSES = [1.0, 0.98, 0.97, 0.5, 0.45]


def test_the_suggestion_is_the_steepest_descent_against_log_rate():
    assert lr_find.suggestion(RATES, LOSSES, skip_begin=0, skip_end=0) == 3


def test_linear_mode_takes_the_slope_against_the_rate():
    assert lr_find.suggestion(RATES, LOSSES, skip_begin=0, skip_end=0, mode="linear") == 0


def test_the_suggestion_skips_the_ends_and_maps_back_past_non_finite_points():
    rates = [10.0 ** k for k in range(-8, 0)]  # 1e-8 ... 1e-1
    losses = [0.1, 9.0, 9.0, math.nan, 8.0, 3.0, 2.9, 0.0]
    # skip_begin 1 and skip_end 1 keep points 1..6; the NaN (3) is left out: losses 9, 9, 8, 3,
    # 2.9 at ln 1e-7, 1e-6, 1e-4, 1e-3, 1e-2 (spacings h, 2h, h, h; h = ln 10). Slopes times h:
    #   end: (9 - 9) / 1 = 0
    #   dx 1, 2: a = -2/3, b = 1/2, c = 1/6:  -6 + 4.5 + 8/6 = -0.167
    #   dx 2, 1: a = -1/6, b = -1/2, c = 2/3: -1.5 - 4 + 2 = -3.5   <- least: point 4
    #   dx 1, 1: (2.9 - 8) / 2 = -2.55;  end: (2.9 - 3) / 1 = -0.1
    assert lr_find.suggestion(rates, losses, skip_begin=1, skip_end=1) == 4


def test_no_suggestion_from_fewer_than_two_finite_points():
    assert lr_find.suggestion([1e-3, 1e-2, 1e-1], [1.0, 0.5, 0.2], 1, 1) is None
    assert lr_find.suggestion([1e-3, 1e-2, 1e-1, 1.0], [1.0, math.nan, 0.2, 0.1], 1, 1) is None


@pytest.mark.parametrize("given, message", [
    ({"min_lr": 1.0, "max_lr": 0.1}, "trainer.lr_find.min_lr=1.0 must be below "
     "trainer.lr_find.max_lr=0.1"),
    ({"min_lr": 0.0}, "trainer.lr_find.min_lr must be > 0, got 0.0"),
    ({"num_training": 12}, "trainer.lr_find.num_training=12 leaves fewer than 2 points for the "
     "suggestion once skip_begin=10 and skip_end=1 are left out: raise it to at least 13"),
    ({"mode": "cubic"}, "trainer.lr_find.mode='cubic' is unknown; choose one of exponential, linear"),
    ({"early_stop_threshold": 0.5}, "trainer.lr_find.early_stop_threshold must be >= 1, got 0.5"),
    ({"skip_begin": -1}, "trainer.lr_find.skip_begin must be >= 0, got -1"),
    ({"beta": 0.9}, "trainer.lr_find.beta is not a setting of the range test"),
])
def test_bad_settings_are_refused_in_one_line(given, message):
    with pytest.raises(ConfigError) as raised:
        lr_find.settings(given)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_thirteen_steps_are_enough_for_the_default_skips():
    assert lr_find.settings({"num_training": 13}).num_training == 13
    assert lr_find.settings({"early_stop_threshold": None}).early_stop_threshold is None
