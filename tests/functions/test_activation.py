"""The activations (functions/activation.py): values against NumPy float64 references and gradients
against finite differences."""

import math

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F


def test_relu_grad(rng):
    x = rng.uniform(0.1, 2.0, size=(4, 5)) * rng.choice([-1.0, 1.0], size=(4, 5))
    check_grads(F.relu, [x], wrt={0})
    np.testing.assert_array_equal(F.relu(x).data, np.where(x > 0, x, 0.0))


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_smooth_activation_grad(rng, name):
    x = rng.normal(size=(4, 5)) * 2
    check_grads(getattr(F, name), [x], wrt={0})


def test_activation_values(rng):
    x = rng.normal(size=(3, 4)) * 3
    np.testing.assert_allclose(F.tanh(x).data, np.tanh(x))
    np.testing.assert_allclose(F.sigmoid(x).data, 1 / (1 + np.exp(-x)), rtol=1e-12)


def _signed(rng, shape):
    return rng.uniform(0.1, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)


@pytest.mark.parametrize("slope", [0.2, 0.5])
def test_leaky_relu(rng, slope):
    x = _signed(rng, (3, 4))
    f = F.leaky_relu if slope == 0.2 else (lambda v: F.leaky_relu(v, slope))
    np.testing.assert_array_equal(f(x).data, np.where(x >= 0, x, slope * x))
    check_grads(f, [x], wrt={0})
    assert F.ACTIVATIONS["leaky_relu"] is F.leaky_relu and F.ACTIVATIONS["gelu"] is F.gelu


def test_gelu(rng):
    x = rng.normal(size=(3, 5)) * 2
    c = math.sqrt(2 / math.pi)
    np.testing.assert_allclose(F.gelu(x).data, 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3))), rtol=1e-14)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)
    np.testing.assert_allclose(F.gelu(x).data, exact, atol=1e-3)  # the tanh form approximates the erf form
    check_grads(F.gelu, [x], wrt={0})


def _ref_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [1, 0, -1])
def test_softmax_and_log_softmax(rng, axis):
    x = rng.normal(size=(3, 4, 2)) * 3
    ref = _ref_log_softmax(x, axis)
    np.testing.assert_allclose(F.log_softmax(x, axis=axis).data, ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(F.softmax(x, axis=axis).data, np.exp(ref), rtol=1e-13)
    np.testing.assert_allclose(F.softmax(x, axis=axis).data.sum(axis=axis), 1.0)
    check_grads(lambda v: F.softmax(v, axis=axis), [x], wrt={0})
    check_grads(lambda v: F.log_softmax(v, axis=axis), [x], wrt={0})


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 0.0, -1000.0]], dtype=np.float32)
    np.testing.assert_allclose(F.softmax(x).data, [[1, 0, 0]])
    np.testing.assert_allclose(F.log_softmax(x).data, [[0, -1000, -2000]])
    assert F.softmax(x).dtype == np.float32
