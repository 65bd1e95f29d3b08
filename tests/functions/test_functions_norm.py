"""Values (against NumPy float64 references) and finite-difference gradients of the normalisation
functions (batch, fixed batch and layer normalisation) and of dropout."""

import numpy as np
import pytest

from trainer_run.functions.noise import dropout
from trainer_run.functions.normalization import (
    batch_normalization,
    fixed_batch_normalization,
    layer_normalization,
)
from trainer_run.params import Parameter


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def _bn_reference(x, gamma, beta, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


# --- batch normalization ------------------------------------------------------------------------


# --- fixed batch normalization --------------------------------------------------------------------


# --- layer normalization --------------------------------------------------------------------------


# --- dtype ----------------------------------------------------------------------------------------


def test_float32_in_float32_out(rng):
    x = rng.normal(size=(4, 3, 2, 2)).astype(np.float32)
    g, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    outs = [
        batch_normalization(Parameter(x), Parameter(g), Parameter(b), running_mean=rm, running_var=rv),
        fixed_batch_normalization(Parameter(x), Parameter(g), Parameter(b), rm, rv),
        layer_normalization(Parameter(x), np.ones(2, np.float32), np.zeros(2, np.float32)),
        dropout(Parameter(x), 0.3, rng=np.random.default_rng(0)),
    ]
    for y in outs:
        assert y.dtype == np.float32
        gx = y.creator.backward(np.ones_like(y.data))[0]
        assert gx.dtype == np.float32
    assert rm.dtype == rv.dtype == np.float32
    np.testing.assert_allclose(outs[0].data, _bn_reference(x.astype(np.float64), g, b, 2e-5), atol=1e-5)


# --- dropout --------------------------------------------------------------------------------------
