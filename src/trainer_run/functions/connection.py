"""Connections with parameters: ``linear(x, W, b)`` computes ``x @ W.T + b`` with ``W`` of
shape ``(out_size, in_size)`` (Chainer's convention). As in Chainer, the first axis of ``x`` is
the batch and the others are one axis of features: images ``(N, C, H, W)`` are flattened to
rows of ``C * H * W`` (:func:`~trainer_run.functions.flatten`) first."""

from __future__ import annotations

from ..autograd import Function, Variable
from .array import flatten


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


def linear(x, W, b=None) -> Variable:
    """``x @ W.T + b``; ``W`` has shape ``(out_size, in_size)``; ``x`` of more than two axes
    is flattened to ``(N, in_size)`` first."""
    if len(x.shape) > 2:
        x = flatten(x)
    return Linear()(x, W) if b is None else Linear()(x, W, b)
