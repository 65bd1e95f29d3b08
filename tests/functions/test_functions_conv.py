"""Convolution and pooling: values against naive direct-loop references (float64), gradients
against finite differences, dtypes preserved."""

import itertools

import numpy as np
import pytest

from trainer_run.functions.convolution import convolution_2d
from trainer_run.functions.pooling import average_pooling_2d, max_pooling_2d


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
