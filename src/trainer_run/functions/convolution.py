"""Two-dimensional convolution with Chainer's semantics (``chainer.functions.convolution_2d``).

``convolution_2d(x, W, b)`` takes ``x`` of shape ``(N, C, H, W)``, filters ``W`` of shape
``(O, C // groups, kh, kw)`` and an optional bias ``b`` of shape ``(O,)``, and returns
``(N, O, out_h, out_w)`` with ``out = (size + 2 * pad - dilate * (k - 1) - 1) // stride + 1``
(Chainer's ``cover_all=False``). It is a cross-correlation (the filter is not flipped): ::

    y[n, o, i, j] = b[o] + sum_{c, p, q} W[o, c, p, q]
                    * x_padded[n, g * C_g + c, i * sy + p * dy, j * sx + q * dx]

where ``g = o // (O // groups)`` is the group of output channel ``o`` and ``C_g = C // groups``.
Zero padding of ``pad`` pixels is added on both sides of each spatial axis.

Implementation: the input is padded into a ``(C, Hp, Wp, N)`` layout; im2col is a strided
view of it (no loop over output pixels), copied once to a ``(groups, C_g * kh * kw,
out_h * out_w * N)`` matrix, and one batched matmul over the groups. The backward pass reuses
that matrix for ``gW`` and scatters ``gx`` back (col2im): a compiled loop
(:mod:`.loops`) where numba is installed, else one vectorised strided add per kernel offset,
``kh * kw`` in all; the two add in the same order and agree bit for bit.

The helpers :func:`pair` and :func:`out_size` are shared with
:mod:`trainer_run.functions.pooling`.
"""

from __future__ import annotations

from .. import jit
from ..autograd import Function, Variable
from ..backend import array_module
from . import loops


def pair(v, name="value"):
    """``(v, v)`` for an int, ``tuple(v)`` for a pair of ints."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name}={v!r} must be an int or a pair of ints")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def out_size(size, k, s, p, d=1):
    """Output length along one axis (Chainer's ``get_conv_outsize``, ``cover_all=False``)."""
    n = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if n <= 0:
        raise ValueError(f"an input of size {size} with kernel {k}, stride {s}, pad {p}, "
                         f"dilate {d} has no output")
    return n


def windows(xpad, kh, kw, oh, ow, s, d):
    """A strided view of shape ``(A, kh, kw, oh, ow, B)`` of ``xpad`` (A, Hp, Wp, B).

    ``view[a, p, q, i, j, b] = xpad[a, i * sy + p * dy, j * sx + q * dx, b]``; no copy is made,
    and overlapping windows share memory, so the view is only read, never written.
    """
    xp = array_module(xpad)
    sa, sh, sw, sb = xpad.strides
    shape = (xpad.shape[0], kh, kw, oh, ow, xpad.shape[3])
    strides = (sa, d[0] * sh, d[1] * sw, s[0] * sh, s[1] * sw, sb)
    return xp.lib.stride_tricks.as_strided(xpad, shape=shape, strides=strides)


def col2im_add(gpad, gcol, s, d):
    """Adds ``gcol`` (A, kh, kw, oh, ow, B) into ``gpad`` (A, Hp, Wp, B): the adjoint of :func:`windows`.

    One vectorised strided add per kernel offset; positions covered by several windows sum.
    """
    kh, kw, oh, ow = gcol.shape[1:5]
    for p in range(kh):
        r0 = p * d[0]
        rows = slice(r0, r0 + s[0] * (oh - 1) + 1, s[0])
        for q in range(kw):
            c0 = q * d[1]
            gpad[:, rows, c0:c0 + s[1] * (ow - 1) + 1:s[1]] += gcol[:, p, q]
    return gpad


class Convolution2D(Function):
    """``y = conv(x, W) + b``; see the module docstring for shapes and semantics.

    Internally images are laid out ``(C, H, W, N)`` (batch innermost), so the im2col copy,
    the col2im adds and the matmul results all run over long contiguous rows. The output is
    that array seen through a transposed view: its shape is ``(N, O, out_h, out_w)`` while its
    memory stays ``(O, out_h, out_w, N)``. Element-wise functions and pooling keep the layout
    of their input, so the next convolution finds its input already in this layout and
    copies nothing; gradients come back in it the same way.
    """

    def __init__(self, stride=1, pad=0, dilate=1, groups=1):
        self.s = pair(stride, "stride")
        self.p = pair(pad, "pad")
        self.d = pair(dilate, "dilate")
        self.groups = int(groups)

    def forward(self, x, W, b=None):
        xp = array_module(x)
        n, c, h, w = x.shape
        o, cg, kh, kw = W.shape
        g = self.groups
        if c % g or o % g or cg * g != c:
            raise ValueError(f"x with {c} channels, W of shape {W.shape} and groups={g} do not match")
        oh = out_size(h, kh, self.s[0], self.p[0], self.d[0])
        ow = out_size(w, kw, self.s[1], self.p[1], self.d[1])
        col = self._im2col(xp, x.transpose(1, 2, 3, 0), kh, kw, oh, ow).reshape(g, cg * kh * kw, oh * ow * n)
        y = xp.matmul(W.reshape(g, o // g, cg * kh * kw), col).reshape(o, oh * ow * n)
        if b is not None:
            y += b.reshape(o, 1)
        self._x_shape, self._W, self._col = x.shape, W, col
        return y.reshape(o, oh, ow, n).transpose(3, 0, 1, 2)

    def _im2col(self, xp, xt, kh, kw, oh, ow):
        """The windows of ``xt`` (C, H, W, N), zero-padded, as one ``(C, kh, kw, oh, ow, N)`` array
        (``xt`` itself for a 1x1 filter of stride 1 without padding)."""
        (ph, pw), (c, h, w, n) = self.p, xt.shape
        if (kh, kw) == (1, 1) and self.s == (1, 1) and (ph, pw) == (0, 0) and xt.flags.c_contiguous:
            return xt
        if (ph, pw) == (0, 0):
            xpad = xt
        else:
            xpad = xp.zeros((c, h + 2 * ph, w + 2 * pw, n), dtype=xt.dtype)
            xpad[:, ph:ph + h, pw:pw + w] = xt
        return xp.ascontiguousarray(windows(xpad, kh, kw, oh, ow, self.s, self.d))

    def backward(self, gy):
        xp = array_module(gy)
        needs, W, col = self.needs, self._W, self._col
        g = self.groups
        o, cg, kh, kw = W.shape
        oh, ow = gy.shape[2:]
        gy_t = xp.ascontiguousarray(gy.transpose(1, 2, 3, 0)).reshape(g, o // g, -1)
        gx = gW = gb = None
        if needs[1]:
            if col.shape[1] > gy_t.shape[1]:  # more taps than outputs: (col @ gy_t^T)^T, the faster order
                gW = xp.matmul(col, gy_t.transpose(0, 2, 1)).transpose(0, 2, 1).reshape(W.shape)
            else:
                gW = xp.matmul(gy_t, col.transpose(0, 2, 1)).reshape(W.shape)
        if len(needs) == 3 and needs[2]:
            gb = gy_t.reshape(o, -1).sum(axis=1)
        if needs[0]:
            gcol = xp.matmul(W.reshape(g, o // g, cg * kh * kw).transpose(0, 2, 1), gy_t)
            gx = self._col2im(xp, gcol.reshape(g * cg, kh, kw, oh, ow, -1))
        self._W = self._col = None
        return gx, gW, gb

    def _col2im(self, xp, gcol):
        """``gx`` (N, C, H, W), laid out ``(C, H, W, N)``, from the column gradient (C, kh, kw, oh, ow, N)."""
        n, c, h, w = self._x_shape
        (ph, pw), (kh, kw) = self.p, gcol.shape[1:3]
        if (kh, kw) == (1, 1) and self.s == (1, 1) and (ph, pw) == (0, 0):
            return gcol.reshape(c, h, w, n).transpose(3, 0, 1, 2)
        gpad = xp.zeros((c, h + 2 * ph, w + 2 * pw, n), dtype=gcol.dtype)
        if jit.usable(loops.col2im, gcol, gpad):
            jit.launch(loops.col2im, gcol.size, gcol, gpad, *self.s, *self.d)
        else:
            col2im_add(gpad, gcol, self.s, self.d)
        return gpad[:, ph:ph + h, pw:pw + w].transpose(3, 0, 1, 2)


def convolution_2d(x, W, b=None, stride=1, pad=0, dilate=1, groups=1) -> Variable:
    """Chainer's ``convolution_2d`` (``cover_all=False``): ``x`` (N, C, H, W), ``W`` (O, C // groups,
    kh, kw), ``b`` (O,) or None -> (N, O, out_h, out_w). ``stride``, ``pad`` and ``dilate`` are
    an int or a ``(row, column)`` pair; padding is with zeros on both sides."""
    f = Convolution2D(stride, pad, dilate, groups)
    return f(x, W) if b is None else f(x, W, b)
