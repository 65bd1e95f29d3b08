"""SGD (optimizers/sgd.py) against MXNet 1.9's ``sgd_update`` and ``sgd_mom_update`` kernels,
recomputed here by hand in float64 (the kernels clip the rescaled gradient, and only when the
Python side passes ``clip_gradient``, i.e. when it is truthy, and the kernel when it is >= 0)::

    sgd_update:      weight = (1 - lr * wd) * weight - lr * clip(rescale_grad * grad)
    sgd_mom_update:  mom    = momentum * mom - lr * wd * weight - lr * clip(rescale_grad * grad)
                     weight = weight + mom

Three steps on small float32 arrays, compared within float32 rounding; one trajectory also by
pencil and paper. Each test runs with the compiled loops and with NumPy's (``JIT_AND_NUMPY``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hand_steps import ATOL, GRADS, KW, RTOL, assert_matches, assert_scale_divided_out, multi_precision_steps
from hand_steps import trajectory as steps

from trainer_run.optimizers import SGD, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def mxnet_sgd(w, g, mom, *, learning_rate, wd, rescale_grad, clip_gradient, momentum):
    """One step of MXNet 1.9's SGD in float64; returns (weight, mom)."""
    g = rescale_grad * g
    if clip_gradient and clip_gradient >= 0:
        g = np.clip(g, -clip_gradient, clip_gradient)
    if momentum == 0:
        return (1 - learning_rate * wd) * w - learning_rate * g, None
    mom = momentum * mom - learning_rate * wd * w - learning_rate * g
    return w + mom, mom


def trajectory(momentum, **kw):
    """The library's and the hand's weights (and momentum) after each step of ``GRADS``."""
    return steps("sgd", mxnet_sgd, momentum, **kw)


def test_the_gradients_are_clipped_in_some_entries_and_not_others():
    clipped = np.abs(np.concatenate(GRADS) * KW["rescale_grad"]) > KW["clip_gradient"]
    assert 0.2 < clipped.mean() < 0.8


@pytest.mark.parametrize("momentum", [0.0, 0.9, 0.5])
def test_three_steps_match_mxnet(momentum):
    assert_matches(trajectory(momentum), momentum)  # plain SGD keeps no state


@pytest.mark.parametrize("clip_gradient", [None, 0.0, -1.0, 100.0])
def test_no_clipping_when_clip_gradient_is_none_zero_negative_or_never_reached(clip_gradient):
    """MXNet passes ``clip_gradient`` to the kernel only when truthy; the kernel clips only
    when it is >= 0."""
    unclipped = list(trajectory(0.9, clip_gradient=None))
    for (weight, state, w, mom), (_, _, w_free, _) in zip(trajectory(0.9, clip_gradient=clip_gradient),
                                                          unclipped):
        np.testing.assert_allclose(weight, w, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(w, w_free, rtol=0, atol=0)


def test_one_element_by_hand():
    """w = 2, lr 0.1, wd 0.01, rescale 0.5, clip 0.4, momentum 0.9:
    step 1, g = 3:    0.5 * 3 = 1.5 -> 0.4;  mom = -0.001 * 2 - 0.04 = -0.042;  w = 1.958
    step 2, g = -0.2: -0.1 (not clipped);  mom = 0.9 * -0.042 - 0.001 * 1.958 + 0.01 = -0.029758;
                      w = 1.958 - 0.029758 = 1.928242"""
    updater = get_updater(SGD(momentum=0.9, **KW))
    weight = np.array([2.0], np.float32)
    updater(0, np.array([3.0], np.float32), weight)
    assert weight[0] == pytest.approx(1.958, rel=1e-6)
    assert updater.states[0][0] == pytest.approx(-0.042, rel=1e-6)
    updater(0, np.array([-0.2], np.float32), weight)
    assert weight[0] == pytest.approx(1.928242, rel=1e-6)
    assert updater.states[0][0] == pytest.approx(-0.029758, rel=1e-5)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_a_loss_scale_the_gradient_carries_is_divided_out_before_clipping(momentum):
    assert_scale_divided_out(lambda: SGD(momentum=momentum, **KW), 1024.0)


def test_a_new_learning_rate_applies_from_the_next_step():
    for weight, _, w, _ in trajectory(0.9, lrs=(0.1, 0.02, 0.3)):
        np.testing.assert_allclose(weight, w, rtol=RTOL, atol=ATOL)


def test_multi_precision_keeps_mxnets_state_then_float32_master():
    """MXNet's SGD's multi-precision state is ``(mom, weight32)``: the master follows the
    float64 hand within float32 rounding and the float16 weight is the master rounded."""
    (state, master), weight, w, mom = multi_precision_steps(
        SGD(momentum=0.9, multi_precision=True, **KW), mxnet_sgd, 0.9)
    assert (state.dtype, master.dtype) == (np.float32, np.float32)
    np.testing.assert_allclose(master, w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state, mom, rtol=RTOL, atol=ATOL)
    assert np.array_equal(weight, master.astype(np.float16))
