"""Max, average and global average pooling (functions/pooling.py): values against a naive direct loop
(float64), gradients against finite differences, ties, the 2x2 fast path, padding with minus
infinity, float32 kept."""

import itertools

import numpy as np
import pytest
from gradients import check_grads

from tests.functions.test_functions_conv import naive_pool
from trainer_run.autograd import backward
from trainer_run.functions.pooling import average_pooling_2d, global_average_pooling_2d, max_pooling_2d
from trainer_run.params import Parameter

POOL_CASES = [  # (x shape, ksize, stride, pad)
    ((2, 3, 4, 4), 2, None, 0),
    ((2, 2, 5, 7), 3, 2, 1),
    ((1, 2, 6, 7), (2, 3), (1, 2), (1, 1)),
    ((1, 3, 7, 5), (3, 2), None, (1, 0)),
    ((1, 1, 5, 5), 3, 1, 1),
]


@pytest.mark.parametrize("xs, ksize, stride, pad", POOL_CASES)
@pytest.mark.parametrize("mode, fn", [("max", max_pooling_2d), ("avg", average_pooling_2d)])
def test_pooling_value_matches_direct_definition(rng, xs, ksize, stride, pad, mode, fn):
    x = rng.normal(size=xs)
    np.testing.assert_allclose(fn(x, ksize, stride, pad).data, naive_pool(x, ksize, stride, pad, mode),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, ksize, stride, pad", POOL_CASES)
@pytest.mark.parametrize("fn", [max_pooling_2d, average_pooling_2d])
def test_pooling_grads(rng, xs, ksize, stride, pad, fn):
    # a permutation of well separated values: no ties, no max within EPS of another
    x = rng.permutation(np.prod(xs)).reshape(xs) * 0.1
    check_grads(lambda a: fn(a, ksize, stride, pad), [x], wrt={0})


def test_max_pooling_gradient_goes_to_first_maximum_on_ties():
    x = Parameter(np.array([[[[1.0, 3.0], [3.0, 2.0]]]]))
    y = max_pooling_2d(x, 2)
    backward(y, gy=np.array([[[[5.0]]]]))
    np.testing.assert_array_equal(x.grad, [[[[0.0, 5.0], [0.0, 0.0]]]])


def test_max_pooling_2x2_fast_path_values_grads_and_ties(rng):
    # ksize == stride == 2, no padding, even H and W: the (N, C, H, W) fast path
    x = rng.normal(size=(2, 3, 4, 6))
    np.testing.assert_array_equal(max_pooling_2d(x, 2).data, naive_pool(x, 2, None, 0, "max"))
    xs = rng.permutation(2 * 2 * 4 * 6).reshape(2, 2, 4, 6) * 0.1
    check_grads(lambda a: max_pooling_2d(a, 2), [xs], wrt={0})
    # small integers: many ties; each window's gradient goes to its first maximum in row-major order
    xt = Parameter(rng.integers(0, 2, size=(3, 2, 6, 4)).astype(np.float32))
    gy = rng.normal(size=(3, 2, 3, 2)).astype(np.float32)
    backward(max_pooling_2d(xt, 2), gy=gy)
    want = np.zeros(xt.shape, np.float32)
    for n, c, i, j in itertools.product(range(3), range(2), range(3), range(2)):
        win = xt.data[n, c, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
        p, q = np.unravel_index(np.argmax(win), (2, 2))  # argmax: the first maximum, row-major
        want[n, c, 2 * i + p, 2 * j + q] = gy[n, c, i, j]
    assert xt.grad.dtype == np.float32
    np.testing.assert_array_equal(xt.grad, want)


def test_global_average_pooling(rng):
    x = rng.normal(size=(3, 4, 5, 2))
    np.testing.assert_allclose(global_average_pooling_2d(x).data,
                               [[x[n, c].sum() / 10 for c in range(4)] for n in range(3)], rtol=1e-12)
    check_grads(global_average_pooling_2d, [x], wrt={0})


@pytest.mark.parametrize("fn", [lambda x: max_pooling_2d(x, 2, 1, 1),
                                lambda x: average_pooling_2d(x, 3, 2, 1), global_average_pooling_2d])
def test_pooling_float32_in_float32_out(rng, fn):
    x = Parameter(rng.normal(size=(2, 3, 5, 5)).astype(np.float32))
    y = fn(x)
    assert y.dtype == np.float32
    backward(y, gy=np.ones(y.shape, np.float32))
    assert x.grad.dtype == np.float32


def test_max_pooling_pads_with_minus_infinity(rng):
    x = -rng.uniform(1.0, 2.0, size=(1, 2, 3, 3))  # every value negative: zero padding would win
    y = max_pooling_2d(x, 2, 2, 1).data
    np.testing.assert_array_equal(y, naive_pool(x, 2, 2, 1, "max"))
    assert (y < 0).all()
