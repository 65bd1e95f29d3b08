"""convolution_2d (functions/convolution.py): values against a naive direct loop (float64), gradients
against finite differences, float32 kept, mismatched groups refused."""

import numpy as np
import pytest
from gradients import check_grads

from tests.functions.test_functions_conv import naive_conv
from trainer_run.autograd import backward
from trainer_run.functions.convolution import convolution_2d
from trainer_run.params import Parameter

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
