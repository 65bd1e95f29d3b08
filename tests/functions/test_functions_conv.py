"""Convolution and pooling: values against naive direct-loop references (float64), gradients
against finite differences, dtypes preserved."""

import itertools

import numpy as np
import pytest
from gradients import check_grads

from trainer_run.autograd import backward
from trainer_run.functions.convolution import convolution_2d
from trainer_run.functions.pooling import average_pooling_2d, global_average_pooling_2d, max_pooling_2d
from trainer_run.params import Parameter


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def _pair(v):
    return (v, v) if isinstance(v, int) else v


def naive_conv(x, W, b, stride, pad, dilate, groups):
    """Direct definition: one scalar product per output element, padding checked by index."""
    (sy, sx), (py, px), (dy, dx) = _pair(stride), _pair(pad), _pair(dilate)
    n, c, h, w = x.shape
    o, cg, kh, kw = W.shape
    og = o // groups
    oh = (h + 2 * py - dy * (kh - 1) - 1) // sy + 1
    ow = (w + 2 * px - dx * (kw - 1) - 1) // sx + 1
    y = np.zeros((n, o, oh, ow))
    for ni, oi, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oi // og
        total = 0.0 if b is None else b[oi]
        for ci, p, q in itertools.product(range(cg), range(kh), range(kw)):
            r, s = i * sy + p * dy - py, j * sx + q * dx - px
            if 0 <= r < h and 0 <= s < w:
                total += W[oi, ci, p, q] * x[ni, g * cg + ci, r, s]
        y[ni, oi, i, j] = total
    return y


def naive_pool(x, ksize, stride, pad, mode):
    """Max (padding -inf) or average (divisor kh * kw, padding counted as zeros) per window."""
    (kh, kw), (py, px) = _pair(ksize), _pair(pad)
    sy, sx = _pair(ksize if stride is None else stride)
    n, c, h, w = x.shape
    oh, ow = (h + 2 * py - kh) // sy + 1, (w + 2 * px - kw) // sx + 1
    y = np.zeros((n, c, oh, ow))
    for ni, ci, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        vals = [x[ni, ci, r, s] if (0 <= r < h and 0 <= s < w) else None
                for r in range(i * sy - py, i * sy - py + kh) for s in range(j * sx - px, j * sx - px + kw)]
        if mode == "max":
            y[ni, ci, i, j] = max(v for v in vals if v is not None)
        else:
            y[ni, ci, i, j] = sum(v for v in vals if v is not None) / (kh * kw)
    return y


CONV_CASES = [  # (x shape, W shape, stride, pad, dilate, groups)
    ((2, 3, 5, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 5, 6), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 2, 7, 6), (3, 2, 3, 2), 2, 1, 1, 1),
    ((2, 2, 7, 8), (2, 2, 2, 3), (2, 3), (0, 2), 1, 1),
    ((1, 2, 9, 8), (3, 2, 3, 3), 1, 2, 2, 1),
    ((1, 3, 9, 10), (2, 3, 2, 3), (1, 2), (1, 0), (3, 2), 1),
    ((2, 4, 5, 5), (6, 2, 3, 3), 1, 1, 1, 2),
    ((1, 6, 6, 7), (6, 1, 3, 3), 2, 1, 1, 6),
    ((1, 6, 6, 5), (3, 2, 1, 1), 1, 0, 1, 3),
    ((1, 1, 4, 4), (1, 1, 4, 4), 1, 0, 1, 1),
]


@pytest.mark.parametrize("xs, ws, stride, pad, dilate, groups", CONV_CASES)
def test_convolution_value_matches_direct_definition(rng, xs, ws, stride, pad, dilate, groups):
    x, W, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=ws[0])
    kwargs = dict(stride=stride, pad=pad, dilate=dilate, groups=groups)
    expected = naive_conv(x, W, b, **kwargs)
    np.testing.assert_allclose(convolution_2d(x, W, b, **kwargs).data, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(convolution_2d(x, W, **kwargs).data, naive_conv(x, W, None, **kwargs),
                               rtol=1e-12, atol=1e-12)


GRAD_CASES = [CONV_CASES[i] for i in (1, 3, 5, 6, 7)]


@pytest.mark.parametrize("xs, ws, stride, pad, dilate, groups", GRAD_CASES)
def test_convolution_grads(rng, xs, ws, stride, pad, dilate, groups):
    x, W, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=ws[0])
    kwargs = dict(stride=stride, pad=pad, dilate=dilate, groups=groups)
    check_grads(lambda *a: convolution_2d(*a, **kwargs), [x, W, b], wrt={0, 1, 2})
    check_grads(lambda *a: convolution_2d(*a, **kwargs), [x, W], wrt={0})
    check_grads(lambda *a: convolution_2d(*a, **kwargs), [x, W], wrt={1})


def test_convolution_float32_in_float32_out(rng):
    x = rng.normal(size=(2, 3, 6, 6)).astype(np.float32)
    W = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    b = rng.normal(size=4).astype(np.float32)
    ps = [Parameter(x.copy()), Parameter(W.copy()), Parameter(b.copy())]
    y = convolution_2d(*ps, pad=1)
    assert y.dtype == np.float32
    expected = naive_conv(x.astype(np.float64), W, b, 1, 1, 1, 1)
    np.testing.assert_allclose(y.data, expected, rtol=1e-4, atol=1e-4)
    backward(y, gy=np.ones(y.shape, np.float32))
    assert [p.grad.dtype for p in ps] == [np.float32] * 3
    np.testing.assert_allclose(ps[2].grad, np.full(4, 2 * 6 * 6, np.float32))


def test_convolution_rejects_mismatched_groups(rng):
    with pytest.raises(ValueError):
        convolution_2d(rng.normal(size=(1, 4, 5, 5)), rng.normal(size=(3, 2, 3, 3)), groups=2)


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


def test_non_contiguous_inputs(rng):
    x = rng.normal(size=(5, 6, 3, 2)).transpose(2, 3, 0, 1)  # (3, 2, 5, 6), not C-contiguous
    W = rng.normal(size=(3, 2, 3, 3)).transpose(0, 1, 3, 2)
    assert not x.flags.c_contiguous and not W.flags.c_contiguous
    np.testing.assert_allclose(convolution_2d(x, W, pad=1).data, naive_conv(x, W, None, 1, 1, 1, 1),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(max_pooling_2d(x, 2).data, naive_pool(x, 2, None, 0, "max"))
    np.testing.assert_allclose(average_pooling_2d(x, 2, 1).data, naive_pool(x, 2, 1, 0, "avg"), rtol=1e-12)


@pytest.mark.parametrize("call", [lambda x: convolution_2d(x, np.zeros((1, 1, 5, 5))),
                                  lambda x: convolution_2d(x, np.zeros((1, 1, 2, 2)), dilate=4),
                                  lambda x: max_pooling_2d(x, 5)])
def test_window_larger_than_input_is_an_error(call):
    with pytest.raises(ValueError, match="no output"):
        call(np.zeros((1, 1, 4, 4)))
