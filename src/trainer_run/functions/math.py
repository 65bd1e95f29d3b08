"""Arithmetic with NumPy broadcasting; each gradient is summed back to its input's shape."""

from __future__ import annotations

from numbers import Number

from ..autograd import Function, Variable


class Add(Function):
    """``a + b`` with NumPy broadcasting; each gradient is summed back to its input's shape."""

    def forward(self, a, b):
        self._shapes = (getattr(a, "shape", ()), getattr(b, "shape", ()))
        return a + b

    def backward(self, gy):
        return tuple(sum_to(gy, shape) for shape in self._shapes)


def sum_to(g, shape):
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


def add(a, b) -> Variable:
    return Add()(a, b)


def scale(x, factor: Number) -> Variable:
    """``x * factor`` for a Python scalar ``factor``."""
    if not isinstance(factor, Number):
        raise TypeError("a Variable can only be multiplied by a Python scalar")
    return Scale(factor)(x)
