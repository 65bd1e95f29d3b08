"""Losses (each a mean: over the batch, the first axis, or over all elements; see each) and metrics."""

from __future__ import annotations

import numpy

from ..autograd import Function, Variable, as_data
from ..backend import array_module
from ..errors import ConfigError
from .activation import logistic


class SoftmaxCrossEntropy(Function):
    """Mean over the batch of ``-log softmax(x)[t]``; ``t`` holds integer class ids (float
    labels of one axis are refused: they are a regression's, and ``dataset.task`` says which).
    Float ``t`` of ``x``'s shape are class probabilities (soft targets, each row summing to 1:
    mixup's and cutmix's labels): the mean of ``-sum(t * log softmax(x))``, Chainer 7's
    ``soft_target_loss='cross-entropy'``.

    Logits of more than two axes (a sequence's ``(batch, time, vocabulary)``) hold the classes
    on the last axis and ``t`` one id per position (``(batch, time)``): the mean is over every
    position. ``ignore_index``: positions whose id is it count nothing, neither in the loss nor
    in the gradient, and the mean is over the others (0 when none is left), Chainer's
    ``ignore_label`` and PyTorch's ``ignore_index``. The probabilities are kept once, for
    backward, which turns them into the gradient in place."""

    def __init__(self, ignore_index: int | None = None):
        self.ignore_index = ignore_index

    def forward(self, x, t):
        self._shape = x.shape
        if x.ndim > 2:
            soft = t.shape == x.shape
            x = x.reshape(-1, x.shape[-1])
            t = t.reshape(x.shape) if soft else t.reshape(-1)
        soft = t.shape == x.shape and t.dtype.kind == "f"
        if not soft and t.dtype.kind not in "iu":
            raise ConfigError(f"softmax_cross_entropy takes integer class ids and the labels are "
                              f"{t.dtype}, a regression's (under dataset.task=auto, float labels "
                              "make one); set dataset.task=classification, or give integer labels")
        xp = array_module(x)
        shifted = x - x.max(axis=1, keepdims=True)
        e = xp.exp(shifted)
        total = e.sum(axis=1, keepdims=True)
        self._p = e / total
        self._keep = None
        if soft:
            self._t, self._rows = t.astype(x.dtype, copy=False), None
            log_p = (self._t * (shifted - xp.log(total))).sum(axis=1)
        else:
            rows, keep = xp.arange(len(t)), None
            if self.ignore_index is not None:
                keep = t != self.ignore_index
                t = xp.where(keep, t, 0)  # any id indexes; an ignored one then counts nothing
            self._t, self._rows = t, rows
            log_p = shifted[rows, t] - xp.log(total[:, 0])
            if keep is not None:
                self._keep, self._count = keep, xp.maximum(keep.sum(), 1)
                return -((log_p * keep).sum(dtype=x.dtype) / self._count).astype(x.dtype)
        return -mean(log_p, x.dtype)

    def backward(self, gy):
        gx = self._p
        if self._rows is None:
            gx -= self._t
        else:
            gx[self._rows, self._t] -= 1
        if self._keep is None:
            gx *= gy / len(self._t)
        else:
            gx *= self._keep[:, None]
            gx *= (gy / self._count).astype(gx.dtype)
        return gx.reshape(self._shape), None


class MeanSquaredError(Function):
    """Mean over all elements of ``(x0 - x1) ** 2``."""

    def forward(self, x0, x1):
        self._diff = x0 - x1
        d = self._diff.ravel()
        return (d @ d / d.size).astype(x0.dtype)

    def backward(self, gy):
        g = self._diff * (gy * (2.0 / self._diff.size)).astype(self._diff.dtype)
        return g, -g


class SigmoidCrossEntropy(Function):
    """Mean of ``-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))``; see :func:`sigmoid_cross_entropy`."""

    def __init__(self, normalize=True):
        self.normalize = normalize

    def forward(self, x, t):
        xp = array_module(x)
        t = t.astype(x.dtype, copy=False)
        self._x, self._t = x, t
        self._count = x.size if self.normalize else len(x)
        # max(x, 0) - x t + log(1 + exp(-|x|)): no overflow for any x.
        loss = xp.maximum(x, 0) - x * t + xp.log1p(xp.exp(-abs(x)))
        return xp.asarray(loss.sum() / x.dtype.type(self._count)).astype(x.dtype)

    def backward(self, gy):
        x = self._x
        return (logistic(x) - self._t) * (gy / x.dtype.type(self._count)).astype(x.dtype), None


def softmax_cross_entropy(x, t, ignore_index: int | None = None) -> Variable:
    """Mean softmax cross entropy of logits ``x`` (N, C) against class ids ``t`` (N,) or class
    probabilities ``t`` (N, C); of a sequence's logits (B, T, V) against ids (B, T), the mean
    over every position; positions whose id is ``ignore_index`` left out (see
    :class:`SoftmaxCrossEntropy`)."""
    return SoftmaxCrossEntropy(ignore_index)(x, t)


def sigmoid_cross_entropy(x, t, normalize=True) -> Variable:
    """Binary cross entropy of logits ``x`` against labels ``t`` in {0, 1} of the same shape.

    Computed as ``max(x, 0) - x t + log(1 + exp(-|x|))`` (stable for large ``|x|``) and summed, then
    divided by the number of elements (``normalize=True``, Chainer's default) or by the batch size
    ``len(x)`` (``normalize=False``). Chainer's ``ignore_label`` (-1) is not supported.
    """
    return SigmoidCrossEntropy(normalize)(x, t)


def mean_squared_error(x0, x1) -> Variable:
    return MeanSquaredError()(x0, x1)


def accuracy(y, t, ignore_index: int | None = None):
    """Fraction of rows of ``y`` whose argmax equals ``t`` (not differentiable; the classes on
    ``y``'s last axis, so a sequence's (B, T, V) logits count every position); class
    probabilities ``t`` (soft targets, ``y``'s shape) count by their largest entry. Positions
    whose id is ``ignore_index`` are left out (0 when none is left), as
    :func:`softmax_cross_entropy` leaves them out."""
    y, t = as_data(y), as_data(t)
    if t.shape == y.shape and t.dtype.kind == "f":
        t = t.argmax(axis=-1)
    right = y.argmax(axis=-1) == t
    if ignore_index is None:
        return mean(right, y.dtype)
    keep = t != ignore_index
    xp = array_module(right)
    return ((right & keep).sum(dtype=y.dtype) / xp.maximum(keep.sum(), 1)).astype(y.dtype)


def mean(a, dtype):
    """``a.mean(dtype=dtype)`` as NumPy computes it (the sum in ``dtype``, divided in float64,
    rounded to ``dtype``), without the Python layers of ``ndarray.mean``."""
    return (a.sum(dtype=dtype) / numpy.float64(a.size)).astype(dtype)
