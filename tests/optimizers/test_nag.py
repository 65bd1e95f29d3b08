"""NAG (optimizers/nag.py) against MXNet 1.9's Python-side ``NAG.update`` (the seed text,
shared/seeds/mxnet_optimizer.txt), recomputed here by hand in float64::

    grad = clip(grad * rescale_grad, -clip_gradient, clip_gradient)   # whenever not None
    with momentum:    mom = momentum * mom;  grad += wd * weight;  mom += grad
                      grad += momentum * mom;  weight += -lr * grad
    without:          weight += -lr * (grad + wd * weight)

``clip`` is MXNet's NDArray operator: ``x > a_max -> a_max, elif x < a_min -> a_min``, so 0
clips every gradient to 0 and a negative bound maps every value to one of the two bounds.
Three steps on small float32 arrays, compared within float32 rounding; one trajectory also by
pencil and paper. Each test runs with the compiled loops and with NumPy's (``JIT_AND_NUMPY``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hand_steps import ATOL, GRADS, KW, RTOL, W0, assert_scale_divided_out, multi_precision_steps
from hand_steps import assert_matches as assert_steps
from hand_steps import trajectory as steps

from trainer_run.optimizers import NAG, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def ndarray_clip(x, a_min, a_max):
    """MXNet's ``clip`` operator, element by element."""
    return np.where(x > a_max, a_max, np.where(x < a_min, a_min, x))


def mxnet_nag(w, g, mom, *, learning_rate, wd, rescale_grad, clip_gradient, momentum):
    """One ``NAG.update`` of MXNet 1.9 in float64, line for line; returns (weight, mom)."""
    g = g * rescale_grad
    if clip_gradient is not None:
        g = ndarray_clip(g, -clip_gradient, clip_gradient)
    if momentum == 0:
        return w + -learning_rate * (g + wd * w), None
    mom = mom * momentum
    g = g + wd * w
    mom = mom + g
    g = g + momentum * mom
    return w + -learning_rate * g, mom


def trajectory(momentum, **kw):
    """The library's weight and state, and the hand's, after each step of ``GRADS``."""
    return steps("nag", mxnet_nag, momentum, **kw)


def assert_matches(momentum, **kw):
    assert_steps(trajectory(momentum, **kw), momentum)


@pytest.mark.parametrize("momentum", [0.0, 0.9, 0.3])
def test_three_steps_match_mxnet(momentum):
    assert_matches(momentum)


@pytest.mark.parametrize("clip_gradient", [None, 100.0, 0.0, -0.25])
def test_clip_gradient_clips_whenever_it_is_not_none(clip_gradient):
    """Unlike SGD's kernel, 0 clips every gradient to 0 (only weight decay moves the weight)
    and a negative bound sends every value to it or its opposite."""
    assert_matches(0.9, clip_gradient=clip_gradient)


def test_clip_gradient_zero_leaves_only_weight_decay():
    """Without momentum: w <- w - lr * wd * w = 0.999 w each step."""
    for step, (weight, _, _, _) in enumerate(trajectory(0.0, clip_gradient=0.0), start=1):
        np.testing.assert_allclose(weight, W0 * 0.999 ** step, rtol=RTOL, atol=ATOL)


def test_the_momentum_is_not_scaled_by_the_learning_rate():
    """The seed's state is the momentum itself, so a rate changed between steps weighs only
    its own step (MXNet 1.9.1's kernel keeps ``lr * momentum`` instead)."""
    lrs = (0.1, 0.02, 0.5)
    assert_matches(0.9, lrs=lrs)
    # the sanity of the data: a momentum kept times the rate ends visibly elsewhere
    weight = list(trajectory(0.9, lrs=lrs))[-1][0]
    w, scaled_mom = W0.astype(np.float64), np.zeros(W0.shape)
    for lr, g in zip(lrs, GRADS):
        g = ndarray_clip(g * 0.5, -0.4, 0.4) + 0.01 * w
        scaled_mom = 0.9 * scaled_mom + lr * g
        w = w - (lr * g + 0.9 * scaled_mom)
    assert np.abs(weight - w).max() > 1e-3


def test_one_element_by_hand():
    """w = 2, lr 0.1, wd 0.01, rescale 0.5, clip 0.4, momentum 0.9:
    step 1, g = 3:    1.5 -> 0.4;  + 0.01 * 2 = 0.42;  mom = 0.42;
                      w = 2 - 0.1 * (0.42 + 0.9 * 0.42) = 1.9202
    step 2, g = -0.2: -0.1;  + 0.01 * 1.9202 = -0.080798;  mom = 0.378 - 0.080798 = 0.297202;
                      w = 1.9202 - 0.1 * (-0.080798 + 0.9 * 0.297202) = 1.90153162"""
    updater = get_updater(NAG(momentum=0.9, **KW))
    weight = np.array([2.0], np.float32)
    updater(0, np.array([3.0], np.float32), weight)
    assert weight[0] == pytest.approx(1.9202, rel=1e-6)
    assert updater.states[0][0] == pytest.approx(0.42, rel=1e-6)
    updater(0, np.array([-0.2], np.float32), weight)
    assert weight[0] == pytest.approx(1.90153162, rel=1e-6)
    assert updater.states[0][0] == pytest.approx(0.297202, rel=1e-5)


def test_a_loss_scale_the_gradient_carries_is_divided_out_before_clipping():
    assert_scale_divided_out(lambda: NAG(momentum=0.9, **KW), 256.0)


def test_multi_precision_keeps_the_seeds_master_then_momentum():
    (master, state), weight, w, mom = multi_precision_steps(
        NAG(momentum=0.9, multi_precision=True, **KW), mxnet_nag, 0.9)
    assert (master.dtype, state.dtype) == (np.float32, np.float32)
    np.testing.assert_allclose(master, w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state, mom, rtol=RTOL, atol=ATOL)
    assert np.array_equal(weight, master.astype(np.float16))
