"""Operations of the optimizers' array path, on NumPy or CuPy chunks (see :mod:`.workspace`).

Each writes into arrays it is given (a chunk of the weight or state, or a scratch buffer),
so a fused step allocates nothing; each computes in a fixed order of operations, which the
compiled loops (:mod:`.scalar_ops`) repeat element by element, so both paths give the same
bits. ``clip`` is a bound of the weight's dtype, or None for no clipping.
"""

from __future__ import annotations


def mx_clip(xp, x, bound, out=None):
    """MXNet's NDArray ``clip(x, -bound, bound)``, into ``out`` (which may be ``x``; a new
    array when None).

    The operator maps ``x > a_max`` to ``a_max``, else ``x < a_min`` to ``a_min``, else keeps
    ``x``. For ``bound >= 0`` that is ``xp.clip``. For a negative ``bound`` (``a_min > a_max``)
    every value becomes ``bound`` (where ``x > bound``) or ``-bound``; NaN stays NaN. Used by
    the optimizers whose MXNet update clips on the Python side.
    """
    if out is None:
        out = xp.empty_like(x)
    if bound >= 0:
        return xp.clip(x, -bound, bound, out=out)
    xp.subtract(bound, x, out=out)           # >= 0 exactly where x <= bound
    xp.heaviside(out, 1, out=out)            # 1 there (-> -bound), 0 where x > bound (-> bound)
    out *= -2 * bound
    out += bound
    return out


def rescaled(xp, out, grad, rescale, clip):
    """``clip(grad * rescale)`` into ``out`` (MXNet's clip, :func:`mx_clip`)."""
    xp.multiply(grad, rescale, out=out)
    if clip is not None:
        mx_clip(xp, out, clip, out=out)
    return out


def decayed(xp, out, tmp, grad, weight, rescale, wd, clip):
    """``clip(grad * rescale + weight * wd)`` into ``out``: weight decay before clipping,
    as MXNet's Adam-family kernels add it; ``tmp`` is scratch."""
    xp.multiply(grad, rescale, out=out)
    if wd:
        xp.multiply(weight, wd, out=tmp)
        out += tmp
    if clip is not None:
        mx_clip(xp, out, clip, out=out)
    return out


def decayed_always(xp, out, tmp, grad, weight, rescale, wd, clip):
    """:func:`decayed` with ``weight * wd`` added even when ``wd`` is 0, as the compiled
    :func:`.scalar_ops.decayed` adds it: an inf or NaN weight then spoils its own gradient
    (``inf * 0`` is NaN) and ``-0 + 0`` gives ``+0`` (the rule of RMSProp, FTML, Adamax and
    Nadam, whose kernels always add the product)."""
    xp.multiply(grad, rescale, out=out)
    out += xp.multiply(weight, wd, out=tmp)
    return out if clip is None else mx_clip(xp, out, clip, out=out)


def mean_square_into(xp, average, value, beta, one_minus_beta, tmp):
    """``average = average * beta + (value * value) * one_minus_beta``, in place: the square
    first, unlike :func:`square_average_into` (MXNet's AdamW, FTML and RMSProp kernels)."""
    average *= beta
    xp.multiply(value, value, out=tmp)
    tmp *= one_minus_beta
    average += tmp


def average_into(xp, average, value, beta, one_minus_beta, tmp):
    """The moving average ``average = average * beta + value * one_minus_beta``, in place."""
    average *= beta
    xp.multiply(value, one_minus_beta, out=tmp)
    average += tmp


def square_average_into(xp, average, value, beta, one_minus_beta, tmp):
    """``average = average * beta + (value * one_minus_beta) * value``, in place."""
    average *= beta
    xp.multiply(value, one_minus_beta, out=tmp)
    tmp *= value
    average += tmp


def scaled_step(xp, out, grad, lr, rescale, clip):
    """``lr * clip(grad * rescale)`` into ``out`` or, unclipped, ``grad * (lr * rescale)``:
    the step of MXNet's SGD-family kernels, with their association (``clip >= 0``: the
    kernels clip only then)."""
    if clip is None:
        return xp.multiply(grad, lr * rescale, out=out)
    rescaled(xp, out, grad, rescale, clip)
    out *= lr
    return out


def momentum_into(xp, mom, weight, step, momentum, decay, tmp):
    """The SGD-family momentum ``mom = mom * momentum - weight * decay - step``, in place
    (``mom`` is the negative of the velocity, as in MXNet's kernels); ``decay`` None leaves
    the weight term out (a caller's zero decay; :data:`.scalar_ops.momentum` always has it,
    which differs only where a weight is not finite). ``tmp`` is scratch."""
    mom *= momentum
    if decay is not None:
        xp.multiply(weight, decay, out=tmp)
        mom -= tmp
    mom -= step
    return mom


def decayed_after_clip(xp, out, tmp, grad, weight, rescale, wd, clip):
    """``clip(grad * rescale) + weight * wd`` into ``out``: weight decay after clipping, as
    MXNet's Python-side updates (NAG, SGLD) add it; ``tmp`` is scratch."""
    rescaled(xp, out, grad, rescale, clip)
    xp.multiply(weight, wd, out=tmp)
    out += tmp
    return out


def sign(xp, x, out, scratch):
    """MXNet's ``(x > 0) - (x < 0)`` into ``out`` (0 for zeros and NaN); ``scratch`` is
    scratch."""
    xp.greater(x, 0, out=out)
    xp.less(x, 0, out=scratch)
    out -= scratch
    return out
