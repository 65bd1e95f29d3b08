"""The compiled loops of convolution, pooling and batch normalization (``functions/loops.py``)
against the functions' array code, and the ``(C, H, W, N)`` layout convolutions keep."""

import numpy as np
import pytest

from trainer_run import functions as F
from trainer_run import jit
from trainer_run.autograd import Variable, backward
from trainer_run.functions import loops
from trainer_run.functions.convolution import col2im_add
from trainer_run.functions.normalization import BatchNormalization
from trainer_run.functions.pooling import MaxPooling2D
from trainer_run.params import Parameter

needs_numba = pytest.mark.skipif(not jit.AVAILABLE, reason="numba is not installed")


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def chwn(a):
    """``a`` (N, C, H, W) copied into ``(C, H, W, N)`` memory, seen as (N, C, H, W)."""
    return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype == np.float32 else np.uint64)


def both_paths(monkeypatch, compute):
    """``compute()`` with the compiled loops, then with the array code."""
    monkeypatch.setattr(jit, "ENABLED", True)
    compiled = compute()
    monkeypatch.setattr(jit, "ENABLED", False)
    return compiled, compute()


@needs_numba
@pytest.mark.parametrize("stride, dilate", [((1, 1), (1, 1)), ((2, 1), (1, 2)), ((2, 2), (2, 1))])
def test_col2im_loop_adds_in_the_order_of_the_array_code(rng, stride, dilate):
    kh, kw, oh, ow = 3, 4, 5, 6
    hp = (oh - 1) * stride[0] + (kh - 1) * dilate[0] + 1
    wp = (ow - 1) * stride[1] + (kw - 1) * dilate[1] + 1
    gcol = rng.normal(size=(3, kh, kw, oh, ow, 7)).astype(np.float32)
    expected = col2im_add(np.zeros((3, hp, wp, 7), np.float32), gcol, stride, dilate)
    got = np.zeros((3, hp, wp, 7), np.float32)
    loops.col2im(gcol, got, *stride, *dilate)
    np.testing.assert_array_equal(bits(got), bits(expected))


@needs_numba
def test_max_pool_backward_loop_equals_the_array_code_bit_for_bit(rng, monkeypatch):
    """Ties (small integers), negative gradients and a NaN gradient (which stays where it is taken)."""
    x = chwn(rng.integers(-2, 3, size=(5, 3, 8, 6)).astype(np.float32))
    gy = rng.normal(size=(5, 3, 4, 3)).astype(np.float32)
    gy[0, 0, 0, 0] = np.nan

    def grads():
        f = MaxPooling2D(2)
        f.forward(x)
        return f.backward(chwn(gy))[0]

    compiled, array_code = both_paths(monkeypatch, grads)
    np.testing.assert_array_equal(bits(compiled), bits(array_code))
    assert compiled.transpose(1, 2, 3, 0).flags.c_contiguous  # x's layout kept
    assert np.isnan(compiled).sum() == 1 and (compiled < 0).any()


@needs_numba
@pytest.mark.parametrize("shape, ksize, stride, pad", [((4, 3, 9, 8), 3, 2, 1), ((2, 5, 10, 10), 3, 1, 1),
                                                       ((3, 2, 7, 9), 2, 3, 0)])
def test_general_max_pool_backward_loop_equals_the_array_code_bit_for_bit(rng, monkeypatch, shape, ksize,
                                                                          stride, pad):
    """Overlapping windows, padding, ties: the same sums, in the same order."""
    x = rng.integers(-2, 3, size=shape).astype(np.float32)
    gy = None

    def grads():
        nonlocal gy
        f = MaxPooling2D(ksize, stride, pad)
        y = f.forward(x)
        gy = rng.normal(size=y.shape).astype(np.float32) if gy is None else gy
        return f.backward(gy)[0]

    compiled, array_code = both_paths(monkeypatch, grads)
    np.testing.assert_array_equal(bits(compiled), bits(array_code))


@needs_numba
def test_batch_norm_loops_match_the_array_code_within_float32_rounding(rng, monkeypatch):
    x = chwn((rng.normal(size=(6, 4, 5, 7)) * 3 + 10).astype(np.float32))
    gamma, beta = (rng.normal(size=4).astype(np.float32) for _ in range(2))
    gy = chwn(rng.normal(size=x.shape).astype(np.float32))

    def run():
        running = np.zeros(4, np.float32), np.ones(4, np.float32)
        f = BatchNormalization(2e-5, *running, 0.9)
        f.needs = (True, True, True)
        y = f.forward(x, gamma, beta)
        return (y, *f.backward(gy), *running)

    compiled, array_code = both_paths(monkeypatch, run)
    for got, want in zip(compiled, array_code):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    assert compiled[0].transpose(1, 2, 3, 0).flags.c_contiguous
    assert compiled[1].transpose(1, 2, 3, 0).flags.c_contiguous


def test_batch_norm_statistics_in_one_pass_are_float64_exact(rng, monkeypatch):
    """A large mean beside a small spread: the compiled statistics (float64 sums) give the
    variance of the float64 reference to float32 precision."""
    x = chwn((rng.normal(size=(50, 2, 9, 9)) * 0.01 + 100).astype(np.float32))
    f = BatchNormalization(0.0, None, None, 0.9)
    y = f.forward(x, np.ones(2, np.float32), np.zeros(2, np.float32))
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(axis=(0, 2, 3), keepdims=True)) / x64.std(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, want, atol=2e-3)


def test_max_pooling_then_relu_equals_relu_then_max_pooling(rng):
    """model=cnn computes ReLU after pooling: the same values and gradients (zeros may differ in
    sign)."""
    x0 = rng.integers(-3, 4, size=(4, 3, 6, 6)).astype(np.float32)  # ties and zeros
    gy = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    results = []
    for pool_first in (True, False):
        x = Parameter(chwn(x0))
        y = F.relu(F.max_pooling_2d(x, 2)) if pool_first else F.max_pooling_2d(F.relu(x), 2)
        backward(y, gy)
        results.append((y.data, x.grad))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_convolution_keeps_the_batch_innermost_layout_through_relu_pooling_and_norm(rng):
    """A convolution's output is (C, H, W, N) memory; element-wise functions, pooling and batch
    normalization keep it; a convolution of such an input equals one of the same values laid
    out (N, C, H, W), bit for bit."""
    x = Variable(rng.normal(size=(3, 2, 8, 8)).astype(np.float32))
    W1, W2 = (rng.normal(size=s).astype(np.float32) for s in ((4, 2, 3, 3), (5, 4, 3, 3)))
    h = F.convolution_2d(x, W1, pad=1)
    for f in (F.relu, lambda v: F.max_pooling_2d(v, 2),
              lambda v: F.batch_normalization(v, np.ones(4, np.float32), np.zeros(4, np.float32))):
        h = f(h)
        assert h.data.transpose(1, 2, 3, 0).flags.c_contiguous
    y = F.convolution_2d(h, W2, pad=1).data
    y_plain = F.convolution_2d(Variable(np.ascontiguousarray(h.data)), W2, pad=1).data
    np.testing.assert_array_equal(bits(y), bits(y_plain))
