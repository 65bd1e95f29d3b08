"""Connections with parameters: ``linear(x, W, b)`` computes ``x @ W.T + b`` with ``W`` of
shape ``(out_size, in_size)`` (Chainer's convention). As in Chainer, the first axis of ``x`` is
the batch and the others are one axis of features: images ``(N, C, H, W)`` are flattened to
rows of ``C * H * W`` (:func:`~trainer_run.functions.flatten`) first."""

from __future__ import annotations

import math

from ..autograd import Function, Variable
from .array import flatten, reshape


class Linear(Function):
    def forward(self, x, W, b=None):
        self._x, self._W = x, W
        y = x @ W.T
        if b is not None:
            y += b
        return y

    def backward(self, gy):
        needs = self.needs
        gx = gy @ self._W if needs[0] else None
        gW = gb = None
        if needs[1]:
            W = self.inputs[1]
            if W.creator is None:
                W.accumulate_matmul(gy.T, self._x)
            else:
                gW = gy.T @ self._x
        if len(needs) == 3 and needs[2]:
            gb = gy.sum(axis=0)
        return gx, gW, gb


def linear(x, W, b=None, n_batch_axes: int = 1) -> Variable:
    """``x @ W.T + b``; ``W`` has shape ``(out_size, in_size)``. The first ``n_batch_axes``
    axes of ``x`` are batch axes, kept in the output, and the others one axis of ``in_size``
    features (Chainer's ``n_batch_axes``): with 1, ``x`` of more than two axes is flattened to
    ``(N, in_size)``; with 2, a sequence's ``(B, T, in_size)`` gives ``(B, T, out_size)``."""
    if n_batch_axes == 1:
        if len(x.shape) > 2:
            x = flatten(x)
        return Linear()(x, W) if b is None else Linear()(x, W, b)
    batch = tuple(x.shape[:n_batch_axes])
    y = linear(reshape(x, (math.prod(batch), -1)), W, b)
    return reshape(y, (*batch, y.shape[-1]))
