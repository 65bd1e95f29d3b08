"""Element operations shared by compiled loops, with the rounding of their NumPy forms.

Each is a :func:`.jit.kernel` (serial) called per element from inside other kernels; called
from Python they run as plain Python on scalars. Each repeats, for one element, the order of
operations of its array form in :mod:`.array_ops`.
"""

from __future__ import annotations

from .. import jit


def _mx_clip_loop(x, bound):
    """MXNet's ``clip(x, -bound, bound)`` of one element (:func:`.optimizer.mx_clip`): the
    usual clip for ``bound >= 0``; else ``bound`` where ``x > bound`` and ``-bound``
    elsewhere; NaN stays NaN."""
    if bound >= 0:
        return min(max(x, -bound), bound)
    if x != x:
        return x
    return bound if x > bound else -bound


def _sign_loop(x, one):
    """MXNet's ``(x > 0) - (x < 0)`` of one element as ``one``'s type (0 for NaN)
    (:func:`.array_ops.sign`)."""
    if x > 0:
        return one
    if x < 0:
        return -one
    return one - one


def _rescaled_loop(g, rescale, clip, clipping):
    """``clip(g * rescale)`` of one element (:func:`.array_ops.rescaled`)."""
    g = g * rescale
    return mx_clip(g, clip) if clipping else g


def _decayed_loop(g, w, rescale, wd, clip, clipping):
    """``clip(g * rescale + w * wd)`` of one element (:func:`.array_ops.decayed`)."""
    g = g * rescale + w * wd
    return mx_clip(g, clip) if clipping else g


def _average_loop(a, x, beta, one_minus_beta):
    """``a * beta + x * one_minus_beta`` (:func:`.array_ops.average_into`)."""
    return a * beta + x * one_minus_beta


def _square_average_loop(a, x, beta, one_minus_beta):
    """``a * beta + (x * one_minus_beta) * x`` (:func:`.array_ops.square_average_into`)."""
    return a * beta + x * one_minus_beta * x


def _mean_square_loop(a, x, beta, one_minus_beta):
    """``a * beta + (x * x) * one_minus_beta`` (:func:`.array_ops.mean_square_into`)."""
    return a * beta + (x * x) * one_minus_beta


mx_clip = jit.kernel(_mx_clip_loop, parallel=False)
rescaled = jit.kernel(_rescaled_loop, parallel=False)
decayed = jit.kernel(_decayed_loop, parallel=False)
average = jit.kernel(_average_loop, parallel=False)
square_average = jit.kernel(_square_average_loop, parallel=False)
mean_square = jit.kernel(_mean_square_loop, parallel=False)
sign = jit.kernel(_sign_loop, parallel=False)


def _scaled_step_loop(g, lr, rescale, clip, clipping):
    """``lr * clip(g * rescale)`` or, unclipped, ``(lr * rescale) * g`` of one element
    (:func:`.array_ops.scaled_step`); ``clip >= 0``, as MXNet's kernels clip only then, so the
    clip is a plain ``min(max(...))``."""
    if clipping:
        return lr * min(max(g * rescale, -clip), clip)
    return (lr * rescale) * g


def _momentum_loop(m, w, step, momentum, decay):
    """``m * momentum - w * decay - step`` of one element (:func:`.array_ops.momentum_into`)."""
    return m * momentum - w * decay - step


def _decayed_after_clip_loop(g, w, rescale, wd, clip, clipping):
    """``clip(g * rescale) + w * wd`` of one element (:func:`.array_ops.decayed_after_clip`)."""
    return rescaled(g, rescale, clip, clipping) + w * wd


scaled_step = jit.kernel(_scaled_step_loop, parallel=False)
momentum = jit.kernel(_momentum_loop, parallel=False)
decayed_after_clip = jit.kernel(_decayed_after_clip_loop, parallel=False)
