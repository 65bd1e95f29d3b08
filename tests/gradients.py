"""Finite-difference gradient checks of differentiable functions, shared by the function tests:
``check_grads(f, arrays, wrt)`` back-propagates a random ``gy`` through ``f`` and compares
the gradients of ``arrays[k]`` (k in ``wrt``) with central differences in float64."""

import numpy as np

from trainer_run.autograd import backward, no_grad
from trainer_run.params import Parameter

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-7


def weighted_sum(f, arrays, c):
    """sum(c * f(*arrays)) computed on plain arrays (no graph)."""
    return float(np.sum(c * np.asarray(f(*arrays).data)))


def numerical_grad(f, arrays, k, c):
    """Central differences of weighted_sum w.r.t. arrays[k]."""
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    x = arrays[k]
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        orig = x[idx]
        x[idx] = orig + EPS
        plus = weighted_sum(f, arrays, c)
        x[idx] = orig - EPS
        minus = weighted_sum(f, arrays, c)
        x[idx] = orig
        g[idx] = (plus - minus) / (2 * EPS)
    return g


def check_grads(f, arrays, wrt, seed=0):
    """Back-propagates gy=c through f and compares the gradients of arrays[wrt] with FD."""
    rng = np.random.default_rng(seed)
    with no_grad():
        out_shape = np.shape(f(*arrays).data)
    c = np.asarray(rng.normal(size=out_shape))
    inputs = [Parameter(a.copy()) if k in wrt else a for k, a in enumerate(arrays)]
    y = f(*inputs)
    backward(y, gy=c)
    for k in wrt:
        expected = numerical_grad(f, arrays, k, c)
        assert inputs[k].grad is not None, f"input {k} received no gradient"
        assert inputs[k].grad.shape == arrays[k].shape
        np.testing.assert_allclose(inputs[k].grad, expected, rtol=RTOL, atol=ATOL)
