"""Batch, fixed batch and layer normalization (functions/normalization.py): values against NumPy
float64 references, running statistics, gradients against finite differences and in closed form, bad
shapes refused."""

import numpy as np
import pytest
from gradients import check_grads

from tests.functions.test_functions_norm import _bn_reference
from trainer_run.autograd import backward
from trainer_run.functions.normalization import (
    batch_normalization,
    fixed_batch_normalization,
    layer_normalization,
)
from trainer_run.params import Parameter

SHAPES = [(5, 3), (2, 3, 2, 2)]


def _inputs(rng, shape):
    c = shape[1]
    x = rng.normal(1.0, 2.0, size=shape)
    return x, rng.uniform(0.5, 2.0, size=c), rng.normal(size=c)


@pytest.mark.parametrize("shape", SHAPES)
def test_batch_normalization_value(rng, shape):
    x, gamma, beta = _inputs(rng, shape)
    y = batch_normalization(x, gamma, beta).data
    np.testing.assert_allclose(y, _bn_reference(x, gamma, beta, 2e-5), rtol=1e-12, atol=1e-12)
    y = batch_normalization(x, gamma, beta, eps=0.5).data
    np.testing.assert_allclose(y, _bn_reference(x, gamma, beta, 0.5), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_batch_normalization_running_statistics(rng, shape):
    c = shape[1]
    axes = (0,) + tuple(range(2, len(shape)))
    m = int(np.prod(shape)) // c
    gamma, beta = np.ones(c), np.zeros(c)
    mean0, var0 = rng.normal(size=c), rng.uniform(0.5, 1.5, size=c)
    running_mean, running_var = mean0.copy(), var0.copy()
    expected_mean, expected_var = mean0, var0
    for decay in (0.9, 0.7):  # two updates, the second with another decay
        x = rng.normal(size=shape)
        batch_normalization(x, gamma, beta, running_mean=running_mean, running_var=running_var, decay=decay)
        unbiased = x.var(axis=axes, ddof=1)
        np.testing.assert_allclose(unbiased, x.var(axis=axes) * m / (m - 1))
        expected_mean = decay * expected_mean + (1 - decay) * x.mean(axis=axes)
        expected_var = decay * expected_var + (1 - decay) * unbiased
        np.testing.assert_allclose(running_mean, expected_mean, rtol=1e-13)
        np.testing.assert_allclose(running_var, expected_var, rtol=1e-13)


def test_batch_normalization_running_mean_only(rng):
    x, gamma, beta = _inputs(rng, (4, 3))
    running_mean = np.zeros(3)
    batch_normalization(x, gamma, beta, running_mean=running_mean)
    np.testing.assert_allclose(running_mean, 0.1 * x.mean(axis=0), rtol=1e-13)


@pytest.mark.parametrize("shape", SHAPES)
def test_batch_normalization_grads(rng, shape):
    x, gamma, beta = _inputs(rng, shape)
    check_grads(batch_normalization, [x, gamma, beta], wrt={0, 1, 2})
    check_grads(batch_normalization, [x, gamma, beta], wrt={0})
    check_grads(batch_normalization, [x, gamma, beta], wrt={1, 2})


def test_batch_normalization_x_grad_sums_to_zero_per_channel(rng):
    # Shifting a channel of x by a constant leaves y unchanged, so the gradient sums to zero.
    x, gamma, beta = _inputs(rng, (4, 3, 2, 2))
    xv = Parameter(x.copy())
    backward(batch_normalization(xv, gamma, beta), gy=rng.normal(size=x.shape))
    np.testing.assert_allclose(xv.grad.sum(axis=(0, 2, 3)), 0, atol=1e-12)


def test_batch_normalization_rejects_bad_shapes(rng):
    x, gamma, beta = _inputs(rng, (4, 3))
    with pytest.raises(ValueError, match="gamma"):
        batch_normalization(x, gamma[:2], beta)
    with pytest.raises(ValueError, match="at least 2"):
        batch_normalization(x[0], gamma, beta)


@pytest.mark.parametrize("shape", SHAPES)
def test_fixed_batch_normalization_value_and_grads(rng, shape):
    x, gamma, beta = _inputs(rng, shape)
    c = shape[1]
    mean, var = rng.normal(size=c), rng.uniform(0.5, 2.0, size=c)
    bshape = (1, -1) + (1,) * (len(shape) - 2)
    expected = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 2e-5)
    expected = expected * gamma.reshape(bshape) + beta.reshape(bshape)
    y = fixed_batch_normalization(x, gamma, beta, mean, var).data
    np.testing.assert_allclose(y, expected, rtol=1e-13, atol=1e-13)
    check_grads(fixed_batch_normalization, [x, gamma, beta, mean, var], wrt={0, 1, 2})
    check_grads(fixed_batch_normalization, [x, gamma, beta, mean, var], wrt={0, 1, 2, 3, 4})


def test_fixed_batch_normalization_closed_form_x_grad(rng):
    x, gamma, beta = _inputs(rng, (4, 3))
    mean, var = rng.normal(size=3), rng.uniform(0.5, 2.0, size=3)
    xv = Parameter(x.copy())
    gy = rng.normal(size=x.shape)
    backward(fixed_batch_normalization(xv, gamma, beta, mean, var, eps=0.1), gy=gy)
    np.testing.assert_allclose(xv.grad, gy * gamma / np.sqrt(var + 0.1), rtol=1e-13)


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_layer_normalization_value_and_grads(rng, shape):
    c = shape[-1]
    x = rng.normal(1.0, 2.0, size=shape)
    gamma, beta = rng.uniform(0.5, 2.0, size=c), rng.normal(size=c)
    expected = np.empty_like(x)
    for idx in np.ndindex(shape[:-1]):  # row by row, independently of the vectorised code
        row = x[idx]
        expected[idx] = (row - row.mean()) / np.sqrt(row.var() + 1e-5) * gamma + beta
    np.testing.assert_allclose(layer_normalization(x, gamma, beta).data, expected, rtol=1e-12, atol=1e-12)
    check_grads(layer_normalization, [x, gamma, beta], wrt={0, 1, 2})
    check_grads(layer_normalization, [x, gamma, beta], wrt={0})


def test_layer_normalization_rejects_bad_shapes(rng):
    with pytest.raises(ValueError, match="beta"):
        layer_normalization(np.ones((2, 4)), np.ones(4), np.ones(3))
