"""Dropout (functions/noise.py): its values and mask from the generator, its gradient in closed form
and against finite differences, ratio 0 the identity, bad ratios refused."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run.autograd import backward
from trainer_run.functions.noise import dropout
from trainer_run.params import Parameter


@pytest.mark.parametrize("ratio", [0.5, 0.2, 0.9])
def test_dropout_values(rng, ratio):
    x = rng.uniform(1.0, 2.0, size=(200, 500))  # no zeros of its own
    y = dropout(x, ratio, rng=np.random.default_rng(7)).data
    zeros = y == 0
    assert abs(zeros.mean() - ratio) < 0.01
    np.testing.assert_allclose(y[~zeros], x[~zeros] / (1 - ratio), rtol=1e-15)
    if ratio == 0.5:
        np.testing.assert_array_equal(y[~zeros], x[~zeros] * 2)


def test_dropout_mask_is_the_generators(rng):
    x = rng.normal(size=(6, 7))
    y1 = dropout(x, 0.4, rng=np.random.default_rng(3)).data
    y2 = dropout(x, 0.4, rng=np.random.default_rng(3)).data
    np.testing.assert_array_equal(y1, y2)
    keep = np.random.default_rng(3).random(x.shape) >= 0.4
    np.testing.assert_array_equal(y1 == 0, ~keep)
    # A generator restored to a saved state draws the same mask again.
    gen = np.random.default_rng(11)
    state = gen.bit_generator.state
    y3 = dropout(x, 0.4, rng=gen).data
    gen.bit_generator.state = state
    np.testing.assert_array_equal(dropout(x, 0.4, rng=gen).data, y3)


def test_dropout_gradient_closed_form_and_fd(rng):
    x = rng.normal(size=(4, 5))
    xv = Parameter(x.copy())
    gy = rng.normal(size=x.shape)
    y = dropout(xv, 0.3, rng=np.random.default_rng(5))
    backward(y, gy=gy)
    keep = np.random.default_rng(5).random(x.shape) >= 0.3
    np.testing.assert_allclose(xv.grad, gy * keep / 0.7, rtol=1e-15)
    check_grads(lambda a: dropout(a, 0.3, rng=np.random.default_rng(5)), [x], wrt={0})


def test_dropout_ratio_zero_is_identity_and_draws_nothing(rng):
    x = rng.normal(size=(3, 4))
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    y = dropout(x, 0.0, rng=gen)
    assert y.data is x
    assert gen.bit_generator.state == state
    xv = Parameter(x)
    assert dropout(xv, 0, rng=gen) is xv


@pytest.mark.parametrize("ratio", [-0.1, 1.0, 1.5])
def test_dropout_rejects_bad_ratio(ratio):
    with pytest.raises(ValueError, match="ratio"):
        dropout(np.ones(3), ratio)
