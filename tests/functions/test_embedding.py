"""embed_id (functions/embedding.py): rows of the table by id, gradients scattered back, of a computed
table and of a shared parameter."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import backward
from trainer_run.params import Parameter


@pytest.mark.parametrize("ids_shape", [(5,), (2, 3)])
def test_embed_id(rng, ids_shape):
    W = rng.normal(size=(4, 3))
    ids = rng.integers(0, 4, size=ids_shape)
    ids.flat[:2] = 1  # a repeated id: its gradient rows sum
    np.testing.assert_array_equal(F.embed_id(ids, W).data, W[ids])
    assert F.embed_id(ids, W).shape == ids_shape + (3,)
    check_grads(F.embed_id, [ids, W], wrt={1})
    Wp = Parameter(W.copy())
    gy = rng.normal(size=ids_shape + (3,))
    backward(F.embed_id(ids, Wp), gy=gy)
    expected = np.zeros_like(W)
    for i, row in zip(ids.ravel(), gy.reshape(-1, 3)):
        expected[i] += row
    np.testing.assert_allclose(Wp.grad, expected)


def test_embed_id_of_a_computed_table_and_of_a_shared_parameter(rng):
    W, ids = rng.normal(size=(4, 3)), np.array([[0, 3], [3, 1]])
    check_grads(lambda w: F.embed_id(ids, F.scale(w, 2.0)), [W], wrt={0})
    check_grads(lambda w: F.add(F.embed_id(ids, w), F.embed_id(ids[::-1], w)), [W], wrt={0})
