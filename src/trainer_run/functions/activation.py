"""Activations: element-wise (``relu``, ``leaky_relu``, ``tanh``, ``sigmoid``, ``gelu``) and along an
axis (``softmax``, ``log_softmax``, numerically stable: the maximum is subtracted first)."""

from __future__ import annotations

import math

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


def logistic(x):
    """The sigmoid of an array (not a Variable), in its dtype: ``tanh(x / 2) / 2 + 1 / 2``, which
    overflows for no ``x``."""
    half = x.dtype.type(0.5)
    return array_module(x).tanh(x * half) * half + half


class Sigmoid(Function):
    def forward(self, x):
        self._y = logistic(x)
        return self._y

    def backward(self, gy):
        y = self._y
        return (gy * y * (1 - y),)


class LeakyReLU(Function):
    def __init__(self, slope):
        self.slope = slope

    def forward(self, x):
        self._mask = x >= 0
        return array_module(x).where(self._mask, x, x * x.dtype.type(self.slope))

    def backward(self, gy):
        return (array_module(gy).where(self._mask, gy, gy * gy.dtype.type(self.slope)),)


_GELU_C = math.sqrt(2 / math.pi)
_GELU_A = 0.044715


class GELU(Function):
    """The tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""

    def forward(self, x):
        xp = array_module(x)
        c, a = x.dtype.type(_GELU_C), x.dtype.type(_GELU_A)
        self._x = x
        self._t = xp.tanh(c * (x + a * x * x * x))
        return x.dtype.type(0.5) * x * (1 + self._t)

    def backward(self, gy):
        x, t = self._x, self._t
        c, a = x.dtype.type(_GELU_C), x.dtype.type(3 * _GELU_A)
        half = x.dtype.type(0.5)
        dy = half * (1 + t) + half * x * (1 - t * t) * c * (1 + a * x * x)
        return (gy * dy,)


class Softmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        xp = array_module(x)
        e = xp.exp(x - x.max(axis=self.axis, keepdims=True))
        self._y = e / e.sum(axis=self.axis, keepdims=True)
        return self._y

    def backward(self, gy):
        y = self._y
        gyy = gy * y
        return (gyy - y * gyy.sum(axis=self.axis, keepdims=True),)


class LogSoftmax(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        xp = array_module(x)
        shifted = x - x.max(axis=self.axis, keepdims=True)
        self._y = shifted - xp.log(xp.exp(shifted).sum(axis=self.axis, keepdims=True))
        return self._y

    def backward(self, gy):
        xp = array_module(gy)
        return (gy - xp.exp(self._y) * gy.sum(axis=self.axis, keepdims=True),)


def relu(x) -> Variable:
    return ReLU()(x)


def tanh(x) -> Variable:
    return Tanh()(x)


def sigmoid(x) -> Variable:
    return Sigmoid()(x)


def leaky_relu(x, slope=0.2) -> Variable:
    """``x`` where ``x >= 0``, else ``slope * x`` (Chainer's ``F.leaky_relu``, default slope 0.2)."""
    return LeakyReLU(slope)(x)


def gelu(x) -> Variable:
    """Gaussian error linear unit, in its tanh approximation.

    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))`` (Hendrycks and Gimpel; PyTorch's
    ``gelu(approximate="tanh")``). The exact form ``0.5 * x * (1 + erf(x / sqrt(2)))`` needs ``erf``,
    which NumPy lacks, and the two backends must compute the same function.
    """
    return GELU()(x)


def softmax(x, axis=1) -> Variable:
    """``exp(x) / sum(exp(x), axis)``, computed after subtracting the maximum along ``axis``."""
    return Softmax(axis)(x)


def log_softmax(x, axis=1) -> Variable:
    """``x - logsumexp(x, axis)``, computed after subtracting the maximum along ``axis``."""
    return LogSoftmax(axis)(x)


ACTIVATIONS = {"relu": relu, "leaky_relu": leaky_relu, "tanh": tanh, "sigmoid": sigmoid, "gelu": gelu}
"""Activations a config names (``model.activation``)."""
