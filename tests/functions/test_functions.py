"""Finite-difference gradient checks and value checks for trainer_run.functions."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import backward
from trainer_run.params import Parameter


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_composition_grad(rng):
    """A small MLP loss: gradients flow through several functions to every parameter."""
    x = rng.normal(size=(5, 3))
    t = rng.integers(0, 2, size=5)

    def loss(W1, b1, W2):
        return F.softmax_cross_entropy(F.linear(F.tanh(F.linear(x, W1, b1)), W2), t)

    check_grads(loss, [rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=(2, 4))],
                wrt={0, 1, 2})


def _float32_cases(rng):
    f32 = np.float32
    x = rng.normal(size=(4, 3)).astype(f32)
    W = rng.normal(size=(2, 3)).astype(f32)
    b = rng.normal(size=2).astype(f32)
    other = rng.normal(size=(4, 3)).astype(f32)
    t = rng.integers(0, 3, size=4).astype(np.int32)
    return {
        "linear": (F.linear, [x, W, b], {0, 1, 2}),
        "linear_nobias": (F.linear, [x, W], {0, 1}),
        "relu": (F.relu, [x], {0}),
        "tanh": (F.tanh, [x], {0}),
        "sigmoid": (F.sigmoid, [x], {0}),
        "softmax_cross_entropy": (F.softmax_cross_entropy, [x, t], {0}),
        "mean_squared_error": (F.mean_squared_error, [x, other], {0, 1}),
        "add": (F.add, [x, other], {0, 1}),
        "scale": (lambda v: F.scale(v, 0.5), [x], {0}),
    }


@pytest.mark.parametrize("name", list(_float32_cases(np.random.default_rng(0))))
def test_float32_in_float32_out(name):
    f, arrays, wrt = _float32_cases(np.random.default_rng(0))[name]
    assert f(*arrays).dtype == np.float32
    inputs = [Parameter(a) if k in wrt else a for k, a in enumerate(arrays)]
    y = f(*inputs)
    assert y.dtype == np.float32
    backward(y)
    for k in wrt:
        assert inputs[k].grad.dtype == np.float32
