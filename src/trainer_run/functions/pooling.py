"""Spatial pooling over ``(N, C, H, W)`` arrays with Chainer's semantics.

``max_pooling_2d`` and ``average_pooling_2d`` slide a ``ksize`` window with ``stride``
(default: ``ksize``) over the input padded by ``pad`` on both sides of each spatial axis, and
return ``(N, C, out_h, out_w)`` with ``out = (size + 2 * pad - k) // stride + 1`` (Chainer's
``cover_all=False``; Chainer's ``max_pooling_2d`` defaults to ``cover_all=True``, which is not
implemented). ``ksize``, ``stride`` and ``pad`` are an int or a ``(row, column)`` pair.

- Max pooling pads with ``-inf``; the gradient of each window goes to its first maximum in
  row-major order (ties are not split).
- Average pooling pads with zeros and always divides by ``kh * kw``, padding included
  (Chainer's convention; PyTorch's ``count_include_pad=True``).
- ``global_average_pooling_2d`` averages over the whole ``H x W`` plane: ``(N, C)``.

Pooling works in the batch-innermost layout convolutions give, ``(C, H, W, N)`` (an input in
another layout is copied into it once), and its output and gradient are views of arrays laid
out so. The windows' offsets ``(p, q)`` are strided views of the padded input, combined offset
by offset in row-major order (maxima, sums); the backward passes scatter offset by offset in
the same order, or run a compiled loop (:mod:`.loops`) that adds in that order. Where the
windows tile the input (stride equal to the window, no padding), each place is written once
instead of added to zero, which differs only in the sign of a zero.
"""

from __future__ import annotations

from .. import jit
from ..autograd import Function, Variable
from ..backend import array_module
from . import loops
from .convolution import out_size, pair


class _Pooling2D(Function):
    """The windows of a pooling over its input laid out ``(C, H, W, N)`` (see the module
    docstring)."""

    def __init__(self, ksize, stride=None, pad=0):
        self.k = pair(ksize, "ksize")
        self.s = self.k if stride is None else pair(stride, "stride")
        self.p = pair(pad, "pad")

    @staticmethod
    def _as_blocks(a):
        """``a`` (N, C, ., .) as a C-contiguous ``(C, ., ., N)`` array (a view where it is one)."""
        return array_module(a).ascontiguousarray(a.transpose(1, 2, 3, 0))

    @staticmethod
    def _from_blocks(a):
        """``a`` (C, ., ., N) seen as ``(N, C, ., .)`` (a view)."""
        return a.transpose(3, 0, 1, 2)

    def _tiles(self, shape):
        """Whether the windows cover the (unpadded) input of ``shape`` exactly once."""
        return (self.s == self.k and self.p == (0, 0) and shape[1] % self.k[0] == 0
                and shape[2] % self.k[1] == 0)

    def _padded(self, x, value):
        """``x``'s blocks padded with ``value`` (the blocks themselves without padding); records
        ``x``'s shape and the output size."""
        self._x_shape, xb = x.shape, self._as_blocks(x)
        (kh, kw), (sh, sw), (ph, pw) = self.k, self.s, self.p
        a, h, w, b = xb.shape
        self._out = out_size(h, kh, sh, ph), out_size(w, kw, sw, pw)
        if (ph, pw) == (0, 0):
            return xb
        xpad = array_module(x).full((a, h + 2 * ph, w + 2 * pw, b), value, dtype=x.dtype)
        xpad[:, ph:ph + h, pw:pw + w] = xb
        return xpad

    def _offsets(self, a):
        """For each kernel offset ``(p, q)`` in row-major order, the view of ``a`` of the output's
        size that the offset reads: ``view[., i, j, .] = a[., i * sh + p, j * sw + q, .]``."""
        (kh, kw), (sh, sw), (oh, ow) = self.k, self.s, self._out
        for p in range(kh):
            for q in range(kw):
                yield a[:, p:p + sh * (oh - 1) + 1:sh, q:q + sw * (ow - 1) + 1:sw]

    def _unpad(self, gpad):
        """The gradient of ``x`` from its padded blocks."""
        (ph, pw), (h, w) = self.p, self._x_shape[2:]
        return self._from_blocks(gpad[:, ph:ph + h, pw:pw + w])


class MaxPooling2D(_Pooling2D):
    """Max over each window; see the module docstring. The backward pass is a compiled loop
    where numba is installed (:func:`.loops.max_pool_2x2_backward` for non-overlapping 2x2
    windows, :func:`.loops.max_pool_backward` otherwise)."""

    def forward(self, x):
        xp = array_module(x)
        xpad = self._padded(x, -xp.inf)
        y = None
        for view in self._offsets(xpad):
            y = view.copy() if y is None else xp.maximum(y, view, out=y)
        self._xpad, self._y = xpad, y
        return self._from_blocks(y)

    def backward(self, gy):
        xp = array_module(gy)
        xpad, y, gy = self._xpad, self._y, self._as_blocks(gy)
        self._xpad = self._y = None
        (kh, kw), (sh, sw) = self.k, self.s
        if (kh, kw) == (2, 2) and self._tiles(xpad.shape) and jit.usable(loops.max_pool_2x2_backward,
                                                                           xpad, y, gy):
            gx = xp.empty_like(xpad)
            jit.launch(loops.max_pool_2x2_backward, gx.size, xpad, y, gy, gx)
            return (self._from_blocks(gx),)
        gpad = xp.zeros(xpad.shape, dtype=gy.dtype)
        if jit.usable(loops.max_pool_backward, xpad, y, gy, gpad):
            jit.launch(loops.max_pool_backward, gpad.size, xpad, y, gy, gpad, kh, kw, sh, sw)
            return (self._unpad(gpad),)
        taken = xp.zeros(y.shape, dtype=bool)
        zero = xp.zeros((), dtype=gy.dtype)
        for seen, place in zip(self._offsets(xpad), self._offsets(gpad)):
            first = (seen == y) & ~taken  # row-major offsets: a window's first maximum takes its gradient
            taken |= first
            place += xp.where(first, gy, zero)
        return (self._unpad(gpad),)


class AveragePooling2D(_Pooling2D):
    """Mean over each window, divided by ``kh * kw`` padding included."""

    def forward(self, x):
        xpad = self._padded(x, 0)
        y = None
        for view in self._offsets(xpad):
            y = view.copy() if y is None else array_module(x).add(y, view, out=y)
        y /= self.k[0] * self.k[1]
        self._pad_shape = xpad.shape
        return self._from_blocks(y)

    def backward(self, gy):
        xp = array_module(gy)
        g = self._as_blocks(gy) / (self.k[0] * self.k[1])
        tiles = self._tiles(self._pad_shape)
        gpad = (xp.empty if tiles else xp.zeros)(self._pad_shape, dtype=g.dtype)
        for place in self._offsets(gpad):
            if tiles:
                place[...] = g
            else:
                place += g
        return (self._unpad(gpad),)


class GlobalAveragePooling2D(Function):
    """Mean over the spatial axes: (N, C, H, W) -> (N, C)."""

    def forward(self, x):
        self._x = x
        return x.mean(axis=(2, 3))

    def backward(self, gy):
        xp, x = array_module(gy), self._x
        self._x = None
        gx = xp.empty_like(x, dtype=gy.dtype)  # x's memory layout
        gx[...] = (gy / (x.shape[2] * x.shape[3]))[:, :, None, None]
        return (gx,)


def max_pooling_2d(x, ksize, stride=None, pad=0) -> Variable:
    """Max pooling (Chainer's, ``cover_all=False``): (N, C, H, W) -> (N, C, out_h, out_w);
    ``stride`` defaults to ``ksize``; padding is with ``-inf``."""
    return MaxPooling2D(ksize, stride, pad)(x)


def average_pooling_2d(x, ksize, stride=None, pad=0) -> Variable:
    """Average pooling (Chainer's): (N, C, H, W) -> (N, C, out_h, out_w); ``stride`` defaults
    to ``ksize``; zero padding counts in the ``kh * kw`` divisor."""
    return AveragePooling2D(ksize, stride, pad)(x)


def global_average_pooling_2d(x) -> Variable:
    """The mean over ``H`` and ``W``: (N, C, H, W) -> (N, C)."""
    return GlobalAveragePooling2D()(x)
