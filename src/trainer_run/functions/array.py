"""Array manipulation: ``reshape``, ``flatten``, ``concat``, ``transpose``, ``get_item``.

These move elements without changing them, so each gradient is the output gradient moved back
(reshaped, split or transposed inversely) to its input's layout.
"""

from __future__ import annotations

from ..autograd import Function, Variable
from ..backend import array_module


class Reshape(Function):
    """``x.reshape(shape)``; ``shape`` may hold one -1 (like NumPy)."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def forward(self, x):
        self._in_shape = x.shape
        return x.reshape(self.shape)

    def backward(self, gy):
        return (gy.reshape(self._in_shape),)


class Concat(Function):
    """``concatenate(xs, axis)``; the gradient is split back at the inputs' boundaries."""

    def __init__(self, axis=1):
        self.axis = axis

    def forward(self, *xs):
        xp = array_module(xs[0])
        self._sizes = [x.shape[self.axis] for x in xs]
        return xp.concatenate(xs, axis=self.axis)

    def backward(self, gy):
        xp = array_module(gy)
        bounds, total = [], 0
        for n in self._sizes[:-1]:
            total += n
            bounds.append(total)
        parts = xp.split(gy, bounds, axis=self.axis)
        return tuple(p if need else None for p, need in zip(parts, self.needs))


class Transpose(Function):
    """``x.transpose(axes)``; ``axes=None`` reverses the axes (like NumPy)."""

    def __init__(self, axes=None):
        self.axes = axes

    def forward(self, x):
        axes = tuple(reversed(range(x.ndim))) if self.axes is None else tuple(a % x.ndim for a in self.axes)
        self._inverse = tuple(sorted(range(x.ndim), key=axes.__getitem__))
        return x.transpose(axes)

    def backward(self, gy):
        return (gy.transpose(self._inverse),)


class GetItem(Function):
    """``x[key]`` for a basic index (integers, slices, Ellipsis); the gradient is ``gy`` placed
    at those elements of zeros."""

    def __init__(self, key):
        self.key = key

    def forward(self, x):
        self._in_shape = x.shape
        return x[self.key]

    def backward(self, gy):
        gx = array_module(gy).zeros(self._in_shape, dtype=gy.dtype)
        gx[self.key] = gy
        return (gx,)


def reshape(x, shape) -> Variable:
    """``x`` with shape ``shape`` (same elements, C order)."""
    return Reshape(shape)(x)


def flatten(x) -> Variable:
    """``x`` reshaped to ``(N, -1)``: each sample (first axis) becomes a row.

    Unlike Chainer's ``F.flatten`` (which flattens to 1-D), the batch axis is kept, which is what
    a ``linear`` after a convolution needs.
    """
    return Reshape((len(x), -1))(x)


def concat(xs, axis=1) -> Variable:
    """Concatenation of the sequence ``xs`` along ``axis`` (Chainer's ``F.concat``, default axis 1)."""
    return Concat(axis)(*xs)


def transpose(x, axes=None) -> Variable:
    """``x`` with its axes permuted by ``axes`` (None: reversed), like ``numpy.transpose``."""
    return Transpose(axes)(x)


def get_item(x, key) -> Variable:
    """``x[key]`` (Chainer's ``F.get_item``) for a basic index: integers, slices and Ellipsis, alone
    or in a tuple; ``x[:, :, 4:8]`` is a view of ``x``'s elements.

    Raises:
        TypeError: for another index (an array, a list, None), whose gradient this does not
            compute.
    """
    parts = key if isinstance(key, tuple) else (key,)
    if not all(isinstance(k, (int, slice)) or k is Ellipsis for k in parts) or any(
            isinstance(k, bool) for k in parts):
        raise TypeError(f"get_item takes integers, slices and Ellipsis, got {key!r}")
    return GetItem(key)(x)
