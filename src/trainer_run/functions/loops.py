"""Compiled loops of the array functions (numba, :mod:`trainer_run.jit`), for NumPy arrays laid
out ``(C, H, W, N)``, the layout convolutions keep (:class:`~.convolution.Convolution2D`).

Each loop computes exactly what the function's array code computes, in the same order of
floating-point operations, so the two agree bit for bit (batch normalization's statistics, summed
in float64 in one pass, agree to float32 rounding); the functions launch a loop only where
:func:`trainer_run.jit.usable` allows (C-contiguous NumPy float arrays, numba enabled) and
otherwise run their array code (CuPy arrays, no numba, other layouts). Every loop runs its
``prange`` over channels.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..jit import prange


def _max_pool_2x2_backward(x, y, gy, gx):
    """``gx[a, 2i + p, 2j + q, b] = gy[a, i, j, b]`` at the first offset ``(p, q)`` in row-major
    order where ``x`` equals the window's maximum ``y``, else 0 (arrays ``(A, H, W, B)``)."""
    a_, oh, ow, b_ = gy.shape
    one, zero = gx.dtype.type(1), gx.dtype.type(0)
    for a in prange(a_):
        for i in range(oh):
            for j in range(ow):
                for b in range(b_):  # branch-free, so that numba vectorises it
                    m, g = y[a, i, j, b], gy[a, i, j, b]
                    f0 = one if x[a, 2 * i, 2 * j, b] == m else zero
                    f1 = (one if x[a, 2 * i, 2 * j + 1, b] == m else zero) * (one - f0)
                    f2 = (one if x[a, 2 * i + 1, 2 * j, b] == m else zero) * (one - f0 - f1)
                    f3 = (one if x[a, 2 * i + 1, 2 * j + 1, b] == m else zero) * (one - f0 - f1 - f2)
                    gx[a, 2 * i, 2 * j, b] = g if f0 == one else zero
                    gx[a, 2 * i, 2 * j + 1, b] = g if f1 == one else zero
                    gx[a, 2 * i + 1, 2 * j, b] = g if f2 == one else zero
                    gx[a, 2 * i + 1, 2 * j + 1, b] = g if f3 == one else zero


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


def _sums(a, b, c):
    """``(sum(a[c]), sum(a[c] * b[c]))`` in float64 (``b`` may be ``a``), accumulated in four
    partial sums each, so that consecutive additions do not wait on each other."""
    m_ = a.shape[1]
    s0 = s1 = s2 = s3 = t0 = t1 = t2 = t3 = 0.0
    full = m_ - m_ % 4
    for k in range(0, full, 4):
        u0, u1 = numpy.float64(a[c, k]), numpy.float64(a[c, k + 1])
        u2, u3 = numpy.float64(a[c, k + 2]), numpy.float64(a[c, k + 3])
        s0 += u0
        s1 += u1
        s2 += u2
        s3 += u3
        t0 += u0 * numpy.float64(b[c, k])
        t1 += u1 * numpy.float64(b[c, k + 1])
        t2 += u2 * numpy.float64(b[c, k + 2])
        t3 += u3 * numpy.float64(b[c, k + 3])
    for k in range(full, m_):
        u0 = numpy.float64(a[c, k])
        s0 += u0
        t0 += u0 * numpy.float64(b[c, k])
    return (s0 + s1) + (s2 + s3), (t0 + t1) + (t2 + t3)


sums = jit.kernel(_sums, parallel=False)


def _batch_norm_forward(x, gamma, beta, eps, mean, var, inv_std, xhat, y):
    """Batch normalization of ``x`` (C, M) over its rows: the statistics in one pass (sum and
    sum of squares in float64, the biased variance), then ``xhat = (x - mean) * inv_std`` and
    ``y = xhat * gamma + beta`` in ``x``'s dtype."""
    c_, m_ = x.shape
    for c in prange(c_):
        s1, s2 = sums(x, x, c)
        mu = s1 / m_
        mean[c] = mu
        var[c] = max(s2 / m_ - mu * mu, 0.0)
        inv_std[c] = 1 / numpy.sqrt(var[c] + eps)
        mc, ic, gc, bc = mean[c], inv_std[c], gamma[c], beta[c]
        for k in range(m_):
            h = (x[c, k] - mc) * ic
            xhat[c, k] = h
            y[c, k] = h * gc + bc


batch_norm_forward = jit.kernel(_batch_norm_forward)


def _batch_norm_backward(gy, xhat, coeff, gx, ggamma, gbeta):
    """The gradients of batch normalization (C, M): ``gbeta = sum(gy)`` and ``ggamma = sum(gy *
    xhat)`` per row in one pass, then ``gx = coeff * (M * gy - gbeta - xhat * ggamma)``."""
    c_, m_ = gy.shape
    m = gy.dtype.type(m_)
    for c in prange(c_):
        s1, s2 = sums(gy, xhat, c)
        gbeta[c] = s1
        ggamma[c] = s2
        gb, gg, k_ = gbeta[c], ggamma[c], coeff[c]
        for k in range(m_):
            gx[c, k] = (gy[c, k] * m - gb - xhat[c, k] * gg) * k_


batch_norm_backward = jit.kernel(_batch_norm_backward)


def _max_pool_backward(xpad, y, gy, gpad, kh, kw, sh, sw):
    """Max pooling's gradient, arrays ``(A, H, W, B)``: ``xpad`` the padded input, ``y`` and
    ``gy`` (A, oh, ow, B), ``gpad`` zeros shaped like ``xpad``. Each window's ``gy`` goes to its
    first maximum in row-major order; the offsets ``(p, q)`` are visited in row-major order,
    each adding to every window's place ``gy`` or 0 (as the array code's ``where``)."""
    a_, oh, ow, b_ = y.shape
    zero = gy.dtype.type(0)
    for a in prange(a_):
        first = numpy.full((oh, ow, b_), kh * kw, numpy.int32)
        for i in range(oh):
            for j in range(ow):
                for p in range(kh - 1, -1, -1):  # the last match written is the first in row-major order
                    for q in range(kw - 1, -1, -1):
                        k = p * kw + q
                        row, m, f = xpad[a, i * sh + p, j * sw + q], y[a, i, j], first[i, j]
                        for b in range(b_):
                            f[b] = k if row[b] == m[b] else f[b]
        for p in range(kh):
            for q in range(kw):
                k = p * kw + q
                for i in range(oh):
                    for j in range(ow):
                        row, g, f = gpad[a, i * sh + p, j * sw + q], gy[a, i, j], first[i, j]
                        for b in range(b_):
                            row[b] += g[b] if f[b] == k else zero


max_pool_backward = jit.kernel(_max_pool_backward)
