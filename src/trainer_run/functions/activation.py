"""Element-wise activations."""

from __future__ import annotations

from ..autograd import Function, Variable
from ..backend import array_module


class ReLU(Function):
    def forward(self, x):
        y = array_module(x).maximum(x, 0)
        self._y = y
        return y

    def backward(self, gy):
        return (gy * (self._y > 0),)


class Tanh(Function):
    def forward(self, x):
        self._y = array_module(x).tanh(x)
        return self._y

    def backward(self, gy):
        y = self._y
        return (gy * (1 - y * y),)


class Sigmoid(Function):
    def forward(self, x):
        xp = array_module(x)
        half = x.dtype.type(0.5)
        self._y = xp.tanh(x * half) * half + half
        return self._y

    def backward(self, gy):
        y = self._y
        return (gy * y * (1 - y),)


def relu(x) -> Variable:
    return ReLU()(x)


def tanh(x) -> Variable:
    return Tanh()(x)


def sigmoid(x) -> Variable:
    return Sigmoid()(x)


ACTIVATIONS = {"relu": relu, "tanh": tanh, "sigmoid": sigmoid}
"""Activations a config names (``model.activation``)."""
