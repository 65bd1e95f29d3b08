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

Windows are strided views of the padded input (no loop over output pixels); the backward
passes scatter with one vectorised strided add per kernel offset.
"""

from __future__ import annotations

from ..autograd import Function, Variable
from ..backend import array_module
from .convolution import col2im_add, out_size, padded, pair, windows


class _Pooling2D(Function):
    def __init__(self, ksize, stride=None, pad=0):
        self.k = pair(ksize, "ksize")
        self.s = self.k if stride is None else pair(stride, "stride")
        self.p = pair(pad, "pad")

    def _windows(self, x, value):
        """(N, C, kh, kw, oh, ow) view of ``x`` padded with ``value``."""
        (kh, kw), (sh, sw), (ph, pw) = self.k, self.s, self.p
        self._x_shape = n, c, h, w = x.shape
        oh, ow = out_size(h, kh, sh, ph), out_size(w, kw, sw, pw)
        xpad = padded(x, ph, pw, value)
        view = windows(xpad.reshape(n * c, h + 2 * ph, w + 2 * pw, 1), kh, kw, oh, ow, self.s, (1, 1))
        return view.reshape(n, c, kh, kw, oh, ow)

    def _scatter(self, gcol):
        """Sums ``gcol`` (N, C, kh, kw, oh, ow) back onto the input: the gradient of ``x``."""
        xp = array_module(gcol)
        n, c, h, w = self._x_shape
        ph, pw = self.p
        gpad = xp.zeros((n * c, h + 2 * ph, w + 2 * pw, 1), dtype=gcol.dtype)
        col2im_add(gpad, gcol.reshape((n * c,) + gcol.shape[2:] + (1,)), self.s, (1, 1))
        return xp.ascontiguousarray(gpad.reshape(n, c, h + 2 * ph, w + 2 * pw)[:, :, ph:ph + h, pw:pw + w])


class MaxPooling2D(_Pooling2D):
    """Max over each window; see the module docstring."""

    def forward(self, x):
        xp = array_module(x)
        view = self._windows(x, -xp.inf)
        n, c, kh, kw, oh, ow = view.shape
        col = xp.ascontiguousarray(view.reshape(n, c, kh * kw, oh, ow))
        self._argmax = col.argmax(axis=2)  # (N, C, oh, ow): flat offset p * kw + q
        return col.max(axis=2)

    def backward(self, gy):
        xp = array_module(gy)
        n, c, oh, ow = gy.shape
        kh, kw = self.k
        offsets = xp.arange(kh * kw).reshape(1, 1, kh * kw, 1, 1)
        onehot = self._argmax[:, :, None] == offsets  # (N, C, kh * kw, oh, ow)
        gcol = (onehot * gy[:, :, None]).astype(gy.dtype, copy=False).reshape(n, c, kh, kw, oh, ow)
        self._argmax = None
        return (self._scatter(gcol),)


class AveragePooling2D(_Pooling2D):
    """Mean over each window, divided by ``kh * kw`` padding included."""

    def forward(self, x):
        y = self._windows(x, 0).sum(axis=(2, 3))
        y /= self.k[0] * self.k[1]
        return y

    def backward(self, gy):
        xp = array_module(gy)
        (kh, kw), (n, c, oh, ow) = self.k, gy.shape
        gcol = xp.broadcast_to((gy / (kh * kw))[:, :, None, None], (n, c, kh, kw, oh, ow))
        return (self._scatter(gcol),)


class GlobalAveragePooling2D(Function):
    """Mean over the spatial axes: (N, C, H, W) -> (N, C)."""

    def forward(self, x):
        self._x_shape = x.shape
        return x.mean(axis=(2, 3))

    def backward(self, gy):
        xp = array_module(gy)
        h, w = self._x_shape[2:]
        gx = xp.empty(self._x_shape, dtype=gy.dtype)
        gx[...] = (gy / (h * w))[:, :, None, None]
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
