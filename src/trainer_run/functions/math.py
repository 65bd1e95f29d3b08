"""Arithmetic with NumPy broadcasting; each gradient is summed back to its input's shape.

Binary functions (``add``, ``sub``, ``mul``, ``div``) take Variables, arrays or Python scalars on
either side; an operand that is not a Variable needing a gradient is a constant. Reductions
(``sum``, ``mean``) follow NumPy's ``axis``/``keepdims`` semantics, and ``matmul`` follows ``@``
for operands of two or more dimensions (leading axes broadcast as a batch).
"""

from __future__ import annotations

from numbers import Number

from ..autograd import Function, Variable
from ..backend import array_module


def _shape(a):
    return getattr(a, "shape", ())


def sum_to(g, shape):
    """Sums ``g`` over the axes along which an array of ``shape`` was broadcast."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


class Add(Function):
    """``a + b`` with NumPy broadcasting; each gradient is summed back to its input's shape."""

    def forward(self, a, b):
        self._shapes = (_shape(a), _shape(b))
        return a + b

    def backward(self, gy):
        return tuple(sum_to(gy, shape) if need else None for shape, need in zip(self._shapes, self.needs))


class Sub(Function):
    """``a - b`` with NumPy broadcasting."""

    def forward(self, a, b):
        self._shapes = (_shape(a), _shape(b))
        return a - b

    def backward(self, gy):
        ga = sum_to(gy, self._shapes[0]) if self.needs[0] else None
        gb = sum_to(-gy, self._shapes[1]) if self.needs[1] else None
        return ga, gb


class Mul(Function):
    """``a * b`` with NumPy broadcasting."""

    def forward(self, a, b):
        self._a, self._b = a, b
        return a * b

    def backward(self, gy):
        a, b = self._a, self._b
        ga = sum_to(gy * b, _shape(a)) if self.needs[0] else None
        gb = sum_to(gy * a, _shape(b)) if self.needs[1] else None
        return ga, gb


class Div(Function):
    """``a / b`` with NumPy broadcasting."""

    def forward(self, a, b):
        self._a, self._b = a, b
        self._y = a / b
        return self._y

    def backward(self, gy):
        a, b = self._a, self._b
        ga = gb = None
        if self.needs[0] or self.needs[1]:
            g = gy / b
            ga = sum_to(g, _shape(a)) if self.needs[0] else None
            gb = sum_to(-g * self._y, _shape(b)) if self.needs[1] else None
        return ga, gb


class Scale(Function):
    def __init__(self, factor):
        self.factor = factor

    def forward(self, x):
        return x * x.dtype.type(self.factor)

    def backward(self, gy):
        return (gy * gy.dtype.type(self.factor),)


class Exp(Function):
    def forward(self, x):
        self._y = array_module(x).exp(x)
        return self._y

    def backward(self, gy):
        return (gy * self._y,)


class Log(Function):
    """Natural logarithm."""

    def forward(self, x):
        self._x = x
        return array_module(x).log(x)

    def backward(self, gy):
        return (gy / self._x,)


def _axes(axis, ndim):
    """``axis`` (None, an int or a tuple, possibly negative) as a sorted tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    axis = (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % ndim for a in axis))


def _broadcast_back(gy, shape, axes, keepdims):
    """``gy`` of a reduction over ``axes`` broadcast back to the input ``shape`` (a new array)."""
    xp = array_module(gy)
    if not keepdims:
        gy = xp.expand_dims(gy, axes) if axes else gy
    return xp.broadcast_to(gy, shape).copy()


class Sum(Function):
    """``x.sum(axis, keepdims=keepdims)``."""

    def __init__(self, axis=None, keepdims=False):
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self._shape, self._axes = x.shape, _axes(self.axis, x.ndim)
        return array_module(x).asarray(x.sum(axis=self._axes, keepdims=self.keepdims))

    def backward(self, gy):
        return (_broadcast_back(gy, self._shape, self._axes, self.keepdims),)


class Mean(Sum):
    """``x.mean(axis, keepdims=keepdims)``."""

    def forward(self, x):
        self._shape, self._axes = x.shape, _axes(self.axis, x.ndim)
        self._count = _count(x.shape, self._axes)
        return array_module(x).asarray(x.mean(axis=self._axes, keepdims=self.keepdims))

    def backward(self, gy):
        g = gy * gy.dtype.type(1.0 / self._count)
        return (_broadcast_back(g, self._shape, self._axes, self.keepdims),)


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


class MatMul(Function):
    """``a @ b`` for operands of two or more dimensions; leading (batch) axes broadcast."""

    def forward(self, a, b):
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(f"matmul needs operands of 2 or more dimensions, got {a.shape} and {b.shape}")
        self._a, self._b = a, b
        return a @ b

    def backward(self, gy):
        a, b = self._a, self._b
        ga = sum_to(gy @ b.swapaxes(-1, -2), a.shape) if self.needs[0] else None
        gb = sum_to(a.swapaxes(-1, -2) @ gy, b.shape) if self.needs[1] else None
        return ga, gb


def add(a, b) -> Variable:
    return Add()(a, b)


def sub(a, b) -> Variable:
    """``a - b`` with broadcasting."""
    return Sub()(a, b)


def mul(a, b) -> Variable:
    """``a * b`` with broadcasting."""
    return Mul()(a, b)


def div(a, b) -> Variable:
    """``a / b`` with broadcasting."""
    return Div()(a, b)


def scale(x, factor: Number) -> Variable:
    """``x * factor`` for a Python scalar ``factor``."""
    if not isinstance(factor, Number):
        raise TypeError("scale takes a Python scalar factor; use mul for arrays and Variables")
    return Scale(factor)(x)


def exp(x) -> Variable:
    return Exp()(x)


def log(x) -> Variable:
    """Natural logarithm (element-wise)."""
    return Log()(x)


def sum(x, axis=None, keepdims=False) -> Variable:  # noqa: A001 - the NumPy/Chainer name
    """Sum over ``axis`` (None: all axes; an int or a tuple), like ``numpy.sum``."""
    return Sum(axis, keepdims)(x)


def mean(x, axis=None, keepdims=False) -> Variable:
    """Mean over ``axis`` (None: all axes; an int or a tuple), like ``numpy.mean``."""
    return Mean(axis, keepdims)(x)


def matmul(a, b) -> Variable:
    """``a @ b`` for operands of 2 or more dimensions (batched like ``numpy.matmul``)."""
    return MatMul()(a, b)
