"""Compiled loops of the array functions (numba, :mod:`trainer_run.jit`), for NumPy arrays laid
out ``(C, H, W, N)``, the layout convolutions keep (:class:`~.convolution.Convolution2D`).

Each loop computes exactly what the function's array code computes, in the same order of
floating-point operations, so the two agree bit for bit; the functions launch a loop only where
:func:`trainer_run.jit.usable` allows (C-contiguous NumPy float arrays, numba enabled) and
otherwise run their array code (CuPy arrays, no numba, other layouts). Every loop runs its
``prange`` over channels.
"""

from __future__ import annotations

from .. import jit
from ..jit import prange


def _max_pool_2x2_backward(x, y, gy, gx):
    """``gx[c, 2i + p, 2j + q, n] = gy[c, i, j, n] * mask``: the mask is 1 at the first offset
    ``(p, q)`` in row-major order where ``x`` equals the window's maximum ``y``, else 0 (so
    -0.0 for a negative ``gy`` and NaN for NaN, as the array code's ``gy * mask``)."""
    c_, oh, ow, n_ = gy.shape
    one, zero = gx.dtype.type(1), gx.dtype.type(0)
    for c in prange(c_):
        for i in range(oh):
            for j in range(ow):
                for n in range(n_):  # branch-free, so that numba vectorises it
                    m, g = y[c, i, j, n], gy[c, i, j, n]
                    f0 = one if x[c, 2 * i, 2 * j, n] == m else zero
                    f1 = (one if x[c, 2 * i, 2 * j + 1, n] == m else zero) * (one - f0)
                    f2 = (one if x[c, 2 * i + 1, 2 * j, n] == m else zero) * (one - f0 - f1)
                    f3 = (one if x[c, 2 * i + 1, 2 * j + 1, n] == m else zero) * (one - f0 - f1 - f2)
                    gx[c, 2 * i, 2 * j, n] = g * f0
                    gx[c, 2 * i, 2 * j + 1, n] = g * f1
                    gx[c, 2 * i + 1, 2 * j, n] = g * f2
                    gx[c, 2 * i + 1, 2 * j + 1, n] = g * f3


max_pool_2x2_backward = jit.kernel(_max_pool_2x2_backward)


def _col2im(gcol, gpad, sy, sx, dy, dx):
    """``gpad[c, i * sy + p * dy, j * sx + q * dx, n] += gcol[c, p, q, i, j, n]``, the offsets
    ``(p, q)`` taken in row-major order (as :func:`~.convolution.col2im_add` adds them)."""
    c_, kh, kw, oh, ow, n_ = gcol.shape
    for c in prange(c_):
        for p in range(kh):
            for q in range(kw):
                for i in range(oh):
                    r = i * sy + p * dy
                    for j in range(ow):
                        s = j * sx + q * dx
                        for n in range(n_):
                            gpad[c, r, s, n] += gcol[c, p, q, i, j, n]


col2im = jit.kernel(_col2im)


def _im2col(xpad, col, sy, sx, dy, dx):
    """``col[c, p, q, i, j, n] = xpad[c, i * sy + p * dy, j * sx + q * dx, n]`` (a copy of
    :func:`~.convolution.windows`)."""
    c_, kh, kw, oh, ow, n_ = col.shape
    for c in prange(c_):
        for p in range(kh):
            for q in range(kw):
                for i in range(oh):
                    r = i * sy + p * dy
                    for j in range(ow):
                        s = j * sx + q * dx
                        for n in range(n_):
                            col[c, p, q, i, j, n] = xpad[c, r, s, n]


im2col = jit.kernel(_im2col)
