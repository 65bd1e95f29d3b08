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

Windows are strided views of the padded input, laid out ``(H, W, N * C)`` (no loop over
output pixels); average pooling sums and both backward passes scatter with one vectorised
strided operation per kernel offset.
"""

from __future__ import annotations

from .. import jit
from ..autograd import Function, Variable
from ..backend import array_module
from . import loops
from .convolution import out_size, pair, windows


class _Pooling2D(Function):
    """Windows over the input laid out ``(1, Hp, Wp, N * C)`` (batch and channels innermost),
    so every vectorised operation runs over rows of ``N * C`` contiguous elements."""

    def __init__(self, ksize, stride=None, pad=0):
        self.k = pair(ksize, "ksize")
        self.s = self.k if stride is None else pair(stride, "stride")
        self.p = pair(pad, "pad")

    def _is_2x2(self, x):
        """Non-overlapping 2x2 windows (``ksize == stride == 2``, no padding, even ``H`` and ``W``):
        the fast path, in ``x``'s own layout, where the four offsets of every window are the
        strided views ``x[:, :, p::2, q::2]``."""
        return (self.k == (2, 2) and self.s == (2, 2) and self.p == (0, 0)
                and x.ndim == 4 and x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0)

    def _windows(self, x, value):
        """(1, kh, kw, oh, ow, N * C) view of ``x`` padded with ``value``; the padded copy, (Hp, Wp,
        N * C), is kept as ``_xt``."""
        xp = array_module(x)
        (kh, kw), (sh, sw), (ph, pw) = self.k, self.s, self.p
        self._x_shape = n, c, h, w = x.shape
        oh, ow = out_size(h, kh, sh, ph), out_size(w, kw, sw, pw)
        xt = xp.full((1, h + 2 * ph, w + 2 * pw, n * c), value, dtype=x.dtype)
        xt[0, ph:ph + h, pw:pw + w] = x.reshape(n * c, h, w).transpose(1, 2, 0)
        self._xt = xt[0]
        return windows(xt, kh, kw, oh, ow, self.s, (1, 1))

    def _from_hwnc(self, y):
        """(oh, ow, N * C) -> (N, C, oh, ow)."""
        n, c = self._x_shape[:2]
        oh, ow = y.shape[:2]
        return array_module(y).ascontiguousarray(y.reshape(oh, ow, n, c).transpose(2, 3, 0, 1))

    def _to_hwnc(self, gy):
        """(N, C, oh, ow) -> (oh, ow, N * C)."""
        n, c, oh, ow = gy.shape
        return array_module(gy).ascontiguousarray(gy.reshape(n * c, oh, ow).transpose(1, 2, 0))

    def _scatter(self, gy, gcol):
        """The gradient of ``x``: ``gcol(p, q)``, an array shaped like ``gy`` (oh, ow, N * C), is the
        gradient reaching kernel offset ``(p, q)``; offsets are visited in row-major order and each
        is added, in one strided add, where that offset read the input."""
        xp = array_module(gy)
        n, c, h, w = self._x_shape
        (kh, kw), (sh, sw), (ph, pw) = self.k, self.s, self.p
        oh, ow = gy.shape[:2]
        gpad = xp.zeros((h + 2 * ph, w + 2 * pw, n * c), dtype=gy.dtype)
        for p in range(kh):
            for q in range(kw):
                gpad[p:p + sh * (oh - 1) + 1:sh, q:q + sw * (ow - 1) + 1:sw] += gcol(p, q)
        return self._unpad(gpad)

    def _unpad(self, gpad):
        """``gx`` (N, C, H, W) from its padded ``(Hp, Wp, N * C)`` form."""
        n, c, h, w = self._x_shape
        ph, pw = self.p
        gx = gpad[ph:ph + h, pw:pw + w].transpose(2, 0, 1).reshape(n, c, h, w)
        return array_module(gpad).ascontiguousarray(gx)


class MaxPooling2D(_Pooling2D):
    """Max over each window; see the module docstring.

    Non-overlapping 2x2 windows take a fast path (:meth:`_is_2x2`): element-wise maxima of the
    four offsets; the backward pass gives each window's gradient to its first maximum in
    row-major order, as the general path (a compiled loop, :mod:`.loops`, where numba is
    installed and the layout allows).
    """

    def forward(self, x):
        xp = array_module(x)
        self._fast = self._is_2x2(x)
        if self._fast:
            self._x_shape = x.shape
            self._x = x
            y = xp.maximum(x[:, :, 0::2, 0::2], x[:, :, 0::2, 1::2])
            xp.maximum(y, x[:, :, 1::2, 0::2], out=y)
            xp.maximum(y, x[:, :, 1::2, 1::2], out=y)
            self._y = y
            return y
        view = self._windows(x, -xp.inf)
        y = view.max(axis=(1, 2))[0]  # (oh, ow, N * C)
        self._view, self._y = view, y
        return self._from_hwnc(y)

    def backward(self, gy):
        if self._fast:
            return (self._backward_2x2(gy),)
        xp = array_module(gy)
        view, y, gy = self._view, self._y, self._to_hwnc(gy)
        kh, kw = self.k
        xt, self._xt = self._xt, None
        if jit.usable(loops.max_pool_backward, xt, y, gy):
            gpad = xp.zeros(xt.shape, dtype=gy.dtype)
            jit.launch(loops.max_pool_backward, gpad.size, xt, y, gy, gpad, kh, kw, *self.s)
            self._view = self._y = None
            return (self._unpad(gpad),)
        taken = xp.zeros(y.shape, dtype=bool)
        zero = xp.zeros((), dtype=gy.dtype)

        def first_max(p, q):  # row-major offsets: the first maximum of a window takes its gradient
            first = (view[0, p, q] == y) & ~taken
            taken[...] |= first
            return xp.where(first, gy, zero)

        self._view = self._y = None
        return (self._scatter(gy, first_max),)


    def _backward_2x2(self, gy):
        xp = array_module(gy)
        x, y = self._x, self._y
        self._x = self._y = None
        gx = xp.empty_like(x, dtype=gy.dtype)  # x's memory layout; every element is written below
        views = _blocks(x, y, gy, gx)
        if views is not None and jit.usable(loops.max_pool_2x2_backward, *views):
            jit.launch(loops.max_pool_2x2_backward, gx.size, *views)
            return gx
        untaken = xp.ones(y.shape, dtype=bool)
        first = xp.empty(y.shape, dtype=bool)
        for p, q in ((0, 0), (0, 1), (1, 0), (1, 1)):  # row-major: the first maximum takes the gradient
            xp.equal(x[:, :, p::2, q::2], y, out=first)
            first &= untaken
            untaken ^= first
            xp.multiply(gy, first, out=gx[:, :, p::2, q::2])
        return gx


def _blocks(x, y, gy, gx):
    """``x``, ``y``, ``gy`` and ``gx`` as C-contiguous ``(A, H, W, B)`` views for the compiled
    loops: ``(C, H, W, N)`` where ``x`` is laid out so (a convolution's output), ``(N * C, H, W,
    1)`` where it is C-contiguous; ``gy`` is copied into that layout if it is not in it. None
    for any other layout of ``x`` or ``gx``."""
    xp = array_module(gy)
    if x.transpose(1, 2, 3, 0).flags.c_contiguous:
        def view(a):
            return a.transpose(1, 2, 3, 0)
    elif x.flags.c_contiguous:
        def view(a):
            return a.reshape(a.shape[0] * a.shape[1], a.shape[2], a.shape[3], 1)
    else:
        return None
    if not view(gx).flags.c_contiguous:
        return None
    if not view(gy).flags.c_contiguous:
        gy, given = xp.empty_like(y), gy
        gy[...] = given
    return view(x), view(y), view(gy), view(gx)


class AveragePooling2D(_Pooling2D):
    """Mean over each window, divided by ``kh * kw`` padding included."""

    def forward(self, x):
        self._fast = self._is_2x2(x)
        if self._fast:  # the general path's sum, in its order: (0, 0) + (0, 1) + (1, 0) + (1, 1)
            self._x = x
            y = x[:, :, 0::2, 0::2] + x[:, :, 0::2, 1::2]
            y += x[:, :, 1::2, 0::2]
            y += x[:, :, 1::2, 1::2]
            y /= 4
            return y
        view = self._windows(x, 0)
        kh, kw = self.k
        y = view[0, 0, 0].copy()
        for p, q in ((p, q) for p in range(kh) for q in range(kw) if p or q):
            y += view[0, p, q]
        y /= kh * kw
        return self._from_hwnc(y)

    def backward(self, gy):
        if self._fast:
            x, self._x = self._x, None
            gx = array_module(gy).empty_like(x, dtype=gy.dtype)  # x's layout
            g = gy / 4
            for p, q in ((0, 0), (0, 1), (1, 0), (1, 1)):
                gx[:, :, p::2, q::2] = g
            return (gx,)
        kh, kw = self.k
        g = self._to_hwnc(gy) / (kh * kw)
        return (self._scatter(g, lambda p, q: g),)


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
