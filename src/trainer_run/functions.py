"""Differentiable functions for MLP-style models.

Each function takes Variables or arrays and returns a Variable. Conventions follow
Chainer: ``linear(x, W, b)`` computes ``x @ W.T + b`` with ``W`` of shape
``(out_size, in_size)``; losses average over the batch (the first axis).
"""

from __future__ import annotations

from numbers import Number

from .autograd import Function, Variable, as_data
from .backend import array_module


class Linear(Function):
    def forward(self, x, W, b=None):
        self._x, self._W = x, W
        y = x @ W.T
        if b is not None:
            y += b
        return y

    def backward(self, gy):
        needs = self.needs
        gx = gy @ self._W if needs[0] else None
        gW = gb = None
        if needs[1]:
            W = self.inputs[1]
            if W.creator is None:
                W.accumulate_matmul(gy.T, self._x)
            else:
                gW = gy.T @ self._x
        if len(needs) == 3 and needs[2]:
            gb = gy.sum(axis=0)
        return gx, gW, gb


class ReLU(Function):
    def forward(self, x):
        y = array_module(x).maximum(x, 0)
        self._y = y
        return y

    def backward(self, gy):
        return (gy * (self._y > 0),)


class Tanh(Function):
    def forward(self, x):
        self._y = array_module(x).tanh(x)
        return self._y

    def backward(self, gy):
        y = self._y
        return (gy * (1 - y * y),)


class Sigmoid(Function):
    def forward(self, x):
        xp = array_module(x)
        half = x.dtype.type(0.5)
        self._y = xp.tanh(x * half) * half + half
        return self._y

    def backward(self, gy):
        y = self._y
        return (gy * y * (1 - y),)


class SoftmaxCrossEntropy(Function):
    """Mean over the batch of ``-log softmax(x)[t]``; ``t`` holds integer class ids."""

    def forward(self, x, t):
        xp = array_module(x)
        shifted = x - x.max(axis=1, keepdims=True)
        e = xp.exp(shifted)
        total = e.sum(axis=1, keepdims=True)
        rows = xp.arange(len(t))
        self._t, self._rows = t, rows
        self._p = e / total
        log_p = shifted[rows, t] - xp.log(total[:, 0])
        return -log_p.mean(dtype=x.dtype).astype(x.dtype)

    def backward(self, gy):
        gx = self._p
        gx[self._rows, self._t] -= 1
        gx *= gy / len(self._t)
        return gx, None


class MeanSquaredError(Function):
    """Mean over all elements of ``(x0 - x1) ** 2``."""

    def forward(self, x0, x1):
        self._diff = x0 - x1
        d = self._diff.ravel()
        return (d @ d / d.size).astype(x0.dtype)

    def backward(self, gy):
        g = self._diff * (gy * (2.0 / self._diff.size)).astype(self._diff.dtype)
        return g, -g


class Add(Function):
    """``a + b`` with NumPy broadcasting; each gradient is summed back to its input's shape."""

    def forward(self, a, b):
        self._shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return a + b

    def backward(self, gy):
        return tuple(_sum_to(gy, shape) for shape in self._shapes)


def _sum_to(g, shape):
    """Sums ``g`` over the axes along which an array of ``shape`` was broadcast."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


class Scale(Function):
    def __init__(self, factor):
        self.factor = factor

    def forward(self, x):
        return x * x.dtype.type(self.factor)

    def backward(self, gy):
        return (gy * gy.dtype.type(self.factor),)


def linear(x, W, b=None) -> Variable:
    """``x @ W.T + b``; ``W`` has shape ``(out_size, in_size)``."""
    return Linear()(x, W) if b is None else Linear()(x, W, b)


def relu(x) -> Variable:
    return ReLU()(x)


def tanh(x) -> Variable:
    return Tanh()(x)


def sigmoid(x) -> Variable:
    return Sigmoid()(x)


def softmax_cross_entropy(x, t) -> Variable:
    """Mean softmax cross entropy of logits ``x`` (N, C) against class ids ``t`` (N,)."""
    return SoftmaxCrossEntropy()(x, t)


def mean_squared_error(x0, x1) -> Variable:
    return MeanSquaredError()(x0, x1)


def add(a, b) -> Variable:
    return Add()(a, b)


def scale(x, factor: Number) -> Variable:
    """``x * factor`` for a Python scalar ``factor``."""
    if not isinstance(factor, Number):
        raise TypeError("a Variable can only be multiplied by a Python scalar")
    return Scale(factor)(x)


def accuracy(y, t):
    """Fraction of rows of ``y`` whose argmax equals ``t`` (not differentiable)."""
    y, t = as_data(y), as_data(t)
    return (y.argmax(axis=1) == t).mean(dtype=y.dtype)


ACTIVATIONS = {"relu": relu, "tanh": tanh, "sigmoid": sigmoid}
