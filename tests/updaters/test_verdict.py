"""The Verdict (updaters/verdict.py) on an update's complete gradients, in-process on a
ParamStore whose gradients the test writes:

- without a dynamic loss scaler the NanPolicy judges the loss, then (clipping by global norm)
  the gradients' global norm;
- with nnabla's dynamic loss scaling the gradients are judged instead of the loss: the scale
  is divided by the factor on every overflow and multiplied by it after ``interval`` clean
  steps, the scales below worked out by hand;
- with clipping by global norm the factor the gradients carry is ``scale / c`` with MXNet's
  ``c = min(1, max_norm / (norm + 1e-8))``, the norm that of the gradients with the scale
  divided out.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer_run.errors import Diverged
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.params import Parameter, ParamStore
from trainer_run.updaters.clipping import GlobalNormClip
from trainer_run.updaters.divergence import NanPolicy
from trainer_run.updaters.verdict import Verdict

# Two parameters whose gradients are (3, 4) and (12,): a global norm of sqrt(9 + 16 + 144) = 13.
GRADS = {"a": [3.0, 4.0], "b": [12.0]}
NORM = 13.0


def store_with(grads=GRADS, times: float = 1.0, dtype=np.float32) -> ParamStore:
    """A store of one parameter per entry of ``grads`` whose gradient is that entry times
    ``times`` (the loss scale it carries)."""
    store = ParamStore({n: Parameter(np.zeros(len(g), dtype), name=n) for n, g in grads.items()})
    for name, g in grads.items():
        store.params[name].grad[...] = np.asarray(g, np.float64) * times
    return store


def overflowed_store() -> ParamStore:
    store = store_with()
    store.params["b"].grad[0] = np.inf
    return store


# -- no loss scaler: the NanPolicy on the loss ---------------------------------------------------

@pytest.mark.parametrize("loss", [0.25, np.float32(7.0), np.asarray(-1.5, np.float32)])
def test_a_finite_loss_applies_the_gradients_with_the_scale_they_carry(loss):
    verdict = Verdict(NanPolicy("stop"), LossScaler(64.0))
    assert verdict(store_with(times=64.0), loss, 64.0, iteration=3) == ("apply", 64.0, None)
    assert verdict.backward_scale() == 64.0


@pytest.mark.parametrize("loss", [math.nan, np.float32(np.inf), np.asarray(-np.inf)])
def test_a_non_finite_loss_skips_under_skip_and_is_counted_in_the_readings(loss):
    verdict = Verdict(NanPolicy("skip"), LossScaler(2.0))
    assert verdict(store_with(times=2.0), loss, 2.0, iteration=0) == ("skip", 2.0, None)
    assert verdict(store_with(times=2.0), 1.0, 2.0, iteration=1) == ("apply", 2.0, None)
    assert verdict.readings() == {"loss_scale": 2.0, "skipped_steps": 1}


def test_a_non_finite_loss_stops_under_stop_before_the_gradients_are_looked_at():
    verdict = Verdict(NanPolicy("stop"), clip=GlobalNormClip(1.0))
    with pytest.raises(Diverged, match=r"^the training loss is nan at iteration 8;"):
        verdict(store_with(), math.nan, 1.0, iteration=7)


def test_without_a_scaler_the_backward_scale_is_one_and_stop_shows_no_reading():
    verdict = Verdict(NanPolicy("stop"))
    assert verdict.backward_scale() == 1.0
    assert verdict.readings() == {}
    assert verdict(store_with(), 1.0, 1.0, iteration=0) == ("apply", 1.0, None)


def test_a_finite_loss_with_an_infinite_global_norm_is_judged_by_the_norm():
    skip = Verdict(NanPolicy("skip"), clip=GlobalNormClip(5.0))
    assert skip(overflowed_store(), 0.5, 1.0, iteration=0)[0] == "skip"
    assert skip.nan.skipped_steps == 1
    stop = Verdict(NanPolicy("stop"), clip=GlobalNormClip(5.0))
    with pytest.raises(Diverged) as caught:
        stop(overflowed_store(), 0.5, 1.0, iteration=4)
    assert str(caught.value).startswith("the gradients' global norm is inf at iteration 5;")


def test_without_clipping_infinite_gradients_under_a_finite_loss_are_applied():
    """No scaler and no clipping: only the loss is judged (the optimizer sees the inf)."""
    verdict = Verdict(NanPolicy("stop"))
    assert verdict(overflowed_store(), 0.5, 1.0, iteration=0) == ("apply", 1.0, None)


# -- dynamic loss scaling (nnabla's rule) ---------------------------------------------------------

def run_dynamic(verdict, steps, clip=False):
    """The verdicts and the scales after each of ``steps`` ("ok" or "inf" gradients; a NaN
    loss every time, which a dynamic scaler never reads)."""
    out = []
    for i, step in enumerate(steps):
        scale = verdict.backward_scale()
        store = store_with(times=scale) if step == "ok" else overflowed_store()
        decision, factor, where = verdict(store, math.nan, scale, iteration=i)
        assert where is None
        if decision == "apply" and not clip:
            assert factor == scale
        out.append((decision, verdict.backward_scale()))
    return out


def test_dynamic_scaling_halves_on_overflow_and_doubles_after_interval_clean_steps():
    verdict = Verdict(NanPolicy("stop"), DynamicLossScaler(scale=8.0, scaling_factor=2.0,
                                                           interval=3))
    steps = ["ok", "ok", "ok", "ok", "inf", "ok", "ok", "inf", "inf", "ok", "ok", "ok"]
    # by hand: 8 -> 3 clean -> 16; 1 clean; inf -> 8 (count restarts); 2 clean; inf -> 4;
    # inf -> 2; 3 clean -> 4
    assert run_dynamic(verdict, steps) == [
        ("apply", 8.0), ("apply", 8.0), ("apply", 16.0), ("apply", 16.0), ("skip", 8.0),
        ("apply", 8.0), ("apply", 8.0), ("skip", 4.0), ("skip", 2.0), ("apply", 2.0),
        ("apply", 2.0), ("apply", 4.0)]
    assert verdict.readings() == {"loss_scale": 4.0, "skipped_steps": 3}


def test_dynamic_scaling_retries_an_overflow_up_to_max_retries_then_skips():
    verdict = Verdict(NanPolicy("skip"), DynamicLossScaler(
        scale=1024.0, scaling_factor=4.0, interval=2, on_overflow="retry", max_retries=2))
    steps = ["inf", "inf", "inf", "ok", "inf", "ok", "ok"]
    # by hand: each overflow divides by 4: 256, 64, 16 (the third is skipped); a success resets
    # the retries: 16, then 4 (retry), then 2 clean steps -> 16
    assert run_dynamic(verdict, steps) == [
        ("retry", 256.0), ("retry", 64.0), ("skip", 16.0), ("apply", 16.0), ("retry", 4.0),
        ("apply", 4.0), ("apply", 16.0)]
    # nan_policy=skip's count is not shown beside the scaler's: the scaler owns skipped_steps
    assert verdict.readings() == {"loss_scale": 16.0, "skipped_steps": 1}


def test_a_norm_whose_sum_of_squares_overflows_counts_as_an_overflow():
    """Finite float32 gradients of 1e20: their squares overflow float32, so the norm is inf."""
    store = store_with({"a": [1e20, 1e20], "b": [1.0]})
    assert bool(store.grads_finite())
    verdict = Verdict(NanPolicy("stop"), DynamicLossScaler(scale=8.0), GlobalNormClip(1.0))
    assert verdict(store, 1.0, 8.0, iteration=0) == ("skip", 8.0, None)
    assert verdict.backward_scale() == 4.0     # backed off for the next computation


# -- clipping by global norm: MXNet's factor -----------------------------------------------------

def mxnet_factor(max_norm: float, norm: float) -> float:
    """``gluon.utils.clip_global_norm``'s ``scale = max_norm / (total_norm + 1e-8)``, at most 1."""
    return min(1.0, max_norm / (norm + 1e-8))


@pytest.mark.parametrize("max_norm", [6.5, 1.0, 12.999, 13.0, 20.0])
@pytest.mark.parametrize("scale", [1.0, 4.0, 1024.0])
def test_clipping_divides_the_carried_scale_by_mxnets_factor(max_norm, scale):
    verdict = Verdict(NanPolicy("stop"), LossScaler(scale), GlobalNormClip(max_norm))
    decision, factor, _ = verdict(store_with(times=scale), 2.0, scale, iteration=0)
    assert decision == "apply"
    c = mxnet_factor(max_norm, NORM)
    assert factor == pytest.approx(scale / c, rel=1e-12)
    # what the optimizer then sees: the gradient times c, the scale divided out
    grad = np.asarray(GRADS["b"]) * scale
    assert grad / factor == pytest.approx(np.asarray(GRADS["b"]) * c, rel=1e-12)
    if max_norm >= 13.0:    # 13 / (13 + 1e-8) < 1: a norm equal to max_norm is clipped a hair
        assert (factor == scale) == (max_norm > 13.0)


def test_clipping_under_dynamic_scaling_sees_the_norm_with_the_scale_divided_out():
    verdict = Verdict(NanPolicy("stop"), DynamicLossScaler(scale=256.0, interval=1000),
                      GlobalNormClip(2.6))
    decision, factor, _ = verdict(store_with(times=256.0), math.nan, 256.0, iteration=0)
    assert decision == "apply"
    assert factor == pytest.approx(256.0 * (NORM + 1e-8) / 2.6, rel=1e-12)   # c = 0.2


def test_float16_gradients_are_summed_in_float32_for_the_norm():
    """(300, 400) in float16: 300**2 overflows float16 (max 65504) but not float32; norm 500."""
    verdict = Verdict(NanPolicy("stop"), clip=GlobalNormClip(50.0))
    store = store_with({"a": [300.0, 400.0]}, dtype=np.float16)
    assert verdict(store, 1.0, 1.0, iteration=0)[1] == pytest.approx(500.00000001 / 50.0,
                                                                       rel=1e-12)
