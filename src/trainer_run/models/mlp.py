"""Fully connected models: the multi-layer perceptron and logistic regression."""

from __future__ import annotations

from typing import Sequence

from ..backend import Backend
from ..errors import ConfigError, check
from ..functions import ACTIVATIONS
from ..layers import Linear
from .base import TASKS, Model, flat


class MLP(Model):
    """A multi-layer perceptron ``in_size -> hidden_sizes... -> out_size`` on inputs flattened
    to rows (an image ``(C, H, W)`` is ``C * H * W`` features).

    Layers are named ``l1``, ``l2``, ...; the activation follows every layer but the last.
    """

    def __init__(self, in_size: int, out_size: int, backend: Backend,
                 hidden_sizes: Sequence[int] = (64, 64), activation: str = "relu",
                 task: str = "classification", dtype="float32"):
        check(activation in ACTIVATIONS,
              f"activation={activation!r} is unknown; choose one of {', '.join(ACTIVATIONS)}")
        check(task in TASKS, f"task={task!r} is unknown; choose one of {', '.join(TASKS)}")
        sizes = [in_size, *hidden_sizes, out_size]
        for size in hidden_sizes:
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ConfigError(f"hidden_sizes must be positive integers, got {list(hidden_sizes)}")
        self.task = task
        self._activation = ACTIVATIONS[activation]
        self._depth = len(sizes) - 1
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            setattr(self, f"l{i}", Linear(n_in, n_out, backend, dtype))

    def forward(self, x):
        x = flat(x)
        for i in range(1, self._depth + 1):
            x = getattr(self, f"l{i}")(x)
            if i < self._depth:
                x = self._activation(x)
        return x


class LogisticRegression(Model):
    """One linear layer with softmax cross entropy (multinomial logistic regression)."""

    def __init__(self, in_size: int, out_size: int, backend: Backend, dtype="float32",
                 task: str = "classification"):
        check(task == "classification", f"task={task!r}: logistic regression is a classifier; "
              "choose model=mlp for a regression dataset")
        self.l1 = Linear(in_size, out_size, backend, dtype)

    def forward(self, x):
        return self.l1(flat(x))
