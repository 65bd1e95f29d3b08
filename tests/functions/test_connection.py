"""The linear function (functions/connection.py): its value in Chainer's convention and its gradients
against finite differences, with and without a bias."""

from __future__ import annotations

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F


def test_linear_grad_with_bias(rng):
    x, W, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    check_grads(F.linear, [x, W, b], wrt={0, 1, 2})


def test_linear_grad_without_bias(rng):
    x, W = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    check_grads(F.linear, [x, W], wrt={0, 1})


def test_linear_value_matches_chainer_convention(rng):
    x, W, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    np.testing.assert_allclose(F.linear(x, W, b).data, x @ W.T + b)
    np.testing.assert_allclose(F.linear(x, W).data, x @ W.T)


@pytest.mark.parametrize("shape", [(4, 3, 2), (4, 1, 2, 3)])
def test_linear_reads_every_axis_after_the_batch_as_features(shape):
    rng = np.random.default_rng(1)
    x = rng.normal(size=shape)
    W, b = rng.normal(size=(5, int(np.prod(shape[1:])))), rng.normal(size=5)
    np.testing.assert_allclose(F.linear(x, W, b).data, x.reshape(shape[0], -1) @ W.T + b)
    check_grads(F.linear, [x, W, b], wrt={0, 1, 2})


def test_linear_keeps_n_batch_axes(rng):
    """Chainer's n_batch_axes: a sequence's (B, T, in) rows give (B, T, out), each position
    ``x[b, t] @ W.T + bias`` as written out."""
    x, W, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(5, 4)), rng.normal(size=5)
    y = F.linear(x, W, b, n_batch_axes=2).data
    assert y.shape == (2, 3, 5)
    for i in range(2):
        for t in range(3):
            np.testing.assert_allclose(y[i, t], W @ x[i, t] + b, rtol=1e-12)
    check_grads(lambda x, W, b: F.linear(x, W, b, n_batch_axes=2), [x, W, b], wrt={0, 1, 2})
