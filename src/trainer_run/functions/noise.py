"""Noise (Chainer's ``chainer.functions.noise``): :func:`dropout`.

Masks are drawn from a ``numpy.random.Generator`` passed in, normally the run's seeded generator
(:attr:`trainer_run.backend.Backend.rng`), so the masks are reproducible and a resume that restores
the generator's state draws the same ones. For CuPy inputs the mask is drawn on the host with that
NumPy generator and moved to the device with ``xp.asarray`` (one host-to-device copy per call):
the stream of draws is then the same on both backends.
"""

from __future__ import annotations

import numpy

from ..autograd import Function, Variable
from ..backend import array_module


class Dropout(Function):
    """``x * mask`` with a mask of ``0`` (probability ``ratio``) or ``1 / (1 - ratio)``; see
    :func:`dropout`."""

    def __init__(self, ratio, rng):
        self.ratio, self.rng = ratio, rng

    def forward(self, x):
        xp = array_module(x)
        keep = self.rng.random(x.shape) >= self.ratio
        scale = x.dtype.type(1 / (1 - self.ratio))
        mask = keep.astype(x.dtype) * scale
        self.mask = mask if xp is numpy else xp.asarray(mask)
        return x * self.mask

    def backward(self, gy):
        return (gy * self.mask,)


def dropout(x, ratio=0.5, rng=None) -> Variable:
    """Drops units at random (Chainer's ``F.dropout``, training mode).

    Each element of ``x`` is zeroed with probability ``ratio`` and the kept ones are scaled by
    ``1 / (1 - ratio)``, so the expectation is ``x``; the gradient is ``gy * mask * scale``, the
    same mask. The mask is ``rng.random(x.shape) >= ratio``, drawn from ``rng`` (a
    ``numpy.random.Generator``, the run's generator; ``None`` takes a fresh unseeded one, so the
    masks are then not reproducible). CuPy inputs get a mask drawn on the host and moved to the
    device. ``ratio=0`` returns ``x`` itself (as a Variable) and draws nothing.

    Raises:
        ValueError: unless ``0 <= ratio < 1``.
    """
    if not 0 <= ratio < 1:
        raise ValueError(f"ratio={ratio!r} must satisfy 0 <= ratio < 1")
    if ratio == 0:
        return x if isinstance(x, Variable) else Variable(x)
    if rng is None:
        rng = numpy.random.default_rng()
    return Dropout(ratio, rng)(x)
