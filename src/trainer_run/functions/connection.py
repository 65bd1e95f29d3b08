"""Connections with parameters: ``linear(x, W, b)`` computes ``x @ W.T + b`` with ``W`` of
shape ``(out_size, in_size)`` (Chainer's convention)."""

from __future__ import annotations

from ..autograd import Function, Variable


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
    """``x @ W.T + b``; ``W`` has shape ``(out_size, in_size)``."""
    return Linear()(x, W) if b is None else Linear()(x, W, b)
