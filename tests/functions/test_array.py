"""The array functions (functions/array.py): reshape, flatten, concat and transpose, values and
gradients against finite differences."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F


def test_reshape_and_flatten(rng):
    x = rng.normal(size=(2, 3, 4))
    np.testing.assert_array_equal(F.reshape(x, (4, -1)).data, x.reshape(4, 6))
    np.testing.assert_array_equal(F.flatten(x).data, x.reshape(2, 12))
    check_grads(lambda v: F.reshape(v, (6, 4)), [x], wrt={0})
    check_grads(F.flatten, [x], wrt={0})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_of_three(rng, axis):
    shapes = {0: [(1, 3), (2, 3), (4, 3)], 1: [(2, 1), (2, 3), (2, 2)], -1: [(2, 1), (2, 3), (2, 2)]}[axis]
    xs = [rng.normal(size=s) for s in shapes]
    np.testing.assert_array_equal(F.concat(xs, axis=axis).data, np.concatenate(xs, axis=axis))
    check_grads(lambda a, b, c: F.concat([a, b, c], axis=axis), xs, wrt={0, 1, 2})
    check_grads(lambda a, b, c: F.concat([a, b, c], axis=axis), xs, wrt={1})


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (0, -1, 1)])
def test_transpose(rng, axes):
    x = rng.normal(size=(2, 3, 4))
    np.testing.assert_array_equal(F.transpose(x, axes).data, np.transpose(x, axes))
    check_grads(lambda v: F.transpose(v, axes), [x], wrt={0})


@pytest.mark.parametrize("key", [(..., slice(2, 4)), 1, (slice(None), 0, slice(1, 6, 2)), (0, 2, 5)])
def test_get_item(rng, key):
    x = rng.normal(size=(2, 3, 6))
    np.testing.assert_array_equal(F.get_item(x, key).data, x[key])
    check_grads(lambda v: F.get_item(v, key), [x], wrt={0})


def test_get_item_refuses_an_advanced_index(rng):
    with pytest.raises(TypeError, match="integers, slices and Ellipsis"):
        F.get_item(rng.normal(size=(3, 2)), np.array([0, 0]))
    with pytest.raises(TypeError, match="integers, slices and Ellipsis"):
        F.get_item(rng.normal(size=(3, 2)), (None, 0))
