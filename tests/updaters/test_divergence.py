"""NanPolicy (updaters/divergence.py): what an update does with a NaN or infinite loss, Chainer's
``FailOnNonNumber`` on the loss. ``stop`` raises Diverged naming the value and the iteration
(counted from 1); ``skip`` skips and counts, and ``max_skipped_in_a_row`` skips in a row stop the
run, a finite loss starting the row again."""

from __future__ import annotations

import math

import pytest

from trainer_run.errors import ConfigError, Diverged
from trainer_run.updaters.divergence import NanPolicy

NON_FINITE = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("loss", [0.0, -3.5, 1e300, 2.25])
@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_a_finite_loss_is_applied_and_counts_nothing(policy, loss):
    nan = NanPolicy(policy, max_skipped_in_a_row=2)
    assert [nan.verdict(loss, i) for i in range(5)] == ["apply"] * 5
    assert (nan.skipped_steps, nan.skipped_in_a_row) == (0, 0)


@pytest.mark.parametrize("loss", NON_FINITE)
def test_stop_raises_diverged_naming_the_value_and_the_iteration(loss):
    nan = NanPolicy("stop")
    with pytest.raises(Diverged) as caught:
        nan.verdict(loss, iteration=41)
    assert str(caught.value) == (
        f"the training loss is {loss} at iteration 42; the update was not applied. Lower "
        "optimizer.learning_rate, set optimizer.clip_gradient, or choose updater.nan_policy=skip")
    assert nan.skipped_steps == 0


def test_stop_names_the_value_it_is_given():
    with pytest.raises(Diverged, match=r"^the gradients' global norm is inf at iteration 1;"):
        NanPolicy("stop").verdict(math.inf, 0, "gradients' global norm")


def test_skip_counts_every_skipped_update_and_the_row_restarts_on_a_finite_loss():
    nan = NanPolicy("skip", max_skipped_in_a_row=3)
    losses = [1.0, math.nan, math.inf, 0.5, -math.inf, math.nan, 2.0, math.nan]
    verdicts = [nan.verdict(loss, i) for i, loss in enumerate(losses)]
    assert verdicts == ["apply", "skip", "skip", "apply", "skip", "skip", "apply", "skip"]
    assert nan.skipped_steps == 5       # every skip, rows or not
    assert nan.skipped_in_a_row == 1    # only the one after the last finite loss


@pytest.mark.parametrize("limit", [1, 2, 4])
def test_the_limit_th_skip_in_a_row_stops_the_run(limit):
    nan = NanPolicy("skip", max_skipped_in_a_row=limit)
    nan.verdict(1.0, 0)
    for i in range(1, limit):
        assert nan.verdict(math.nan, i) == "skip"
    with pytest.raises(Diverged) as caught:
        nan.verdict(math.nan, 10 + limit)
    assert str(caught.value) == (
        f"the training loss was NaN or infinite in each of the last {limit} updates, up to "
        f"iteration {11 + limit}, and all were skipped (updater.max_skipped_in_a_row). Lower "
        "optimizer.learning_rate or set optimizer.clip_gradient")
    assert (nan.skipped_steps, nan.skipped_in_a_row) == (limit, limit)


def test_a_finite_loss_before_the_limit_saves_the_run():
    nan = NanPolicy("skip", max_skipped_in_a_row=3)
    for cycle in range(4):              # two skips, then a finite loss: never 3 in a row
        assert nan.verdict(math.nan, 3 * cycle) == "skip"
        assert nan.verdict(math.inf, 3 * cycle + 1) == "skip"
        assert nan.verdict(0.1, 3 * cycle + 2) == "apply"
    assert nan.skipped_steps == 8


def test_no_limit_skips_for_ever():
    nan = NanPolicy("skip", max_skipped_in_a_row=None)
    assert all(nan.verdict(math.nan, i) == "skip" for i in range(1000))
    assert nan.skipped_in_a_row == 1000


def test_the_counts_survive_a_state_round_trip_and_the_limit_counts_on():
    nan = NanPolicy("skip", max_skipped_in_a_row=3)
    for i, loss in enumerate([math.nan, 1.0, math.nan, math.nan]):
        nan.verdict(loss, i)
    assert nan.state_dict() == {"skipped_steps": 3, "skipped_in_a_row": 2}
    resumed = NanPolicy("skip", max_skipped_in_a_row=3)
    resumed.load_state_dict(nan.state_dict())
    with pytest.raises(Diverged, match="each of the last 3 updates, up to iteration 5,"):
        resumed.verdict(math.nan, 4)


def test_a_state_without_counts_loads_as_zero():
    nan = NanPolicy("skip")
    nan.skipped_steps, nan.skipped_in_a_row = 7, 2
    nan.load_state_dict({})
    assert (nan.skipped_steps, nan.skipped_in_a_row) == (0, 0)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(policy="ignore"), "nan_policy='ignore' is unknown; choose one of stop, skip"),
    (dict(max_skipped_in_a_row=0), "max_skipped_in_a_row must be >= 1, got 0"),
    (dict(max_skipped_in_a_row=2.5), "max_skipped_in_a_row must be an integer, got 2.5"),
])
def test_bad_settings_are_refused_with_one_line(kwargs, message):
    with pytest.raises(ConfigError) as caught:
        NanPolicy(**kwargs)
    assert str(caught.value) == message
