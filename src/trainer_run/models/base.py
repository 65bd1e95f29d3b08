"""Models: containers of named parameters that map a batch to a loss.

The model protocol (what the training loop needs from any model, ours or yours):

- ``params()`` returns an ordered mapping from parameter path (``"l1/W"``) to
  :class:`~trainer_run.params.Parameter`. The order fixes each parameter's index.
- ``model(*batch)`` runs forward on one converted batch and returns either the loss (a
  scalar :class:`~trainer_run.autograd.Variable`) or a dict with key ``"loss"`` and any
  further scalar metrics (e.g. ``"accuracy"``), which are reported as ``train/<name>``
  and ``val/<name>``.
- A model must read its parameters through ``param.data`` on every call: the trainer
  packs parameters into flat buffers and rebinds ``data`` to views.
- **Mode.** The updater calls the model in training mode, evaluation (validation, test) and
  prediction in evaluation mode (:func:`set_mode`): a :class:`Module` reads its mode from
  ``self.training`` (True while training; dropout and batch statistics act only then) and
  changes it with ``train()`` / ``eval()``, like PyTorch's; any other model that has a
  ``training`` attribute gets it set, and one without is called as it is.

:class:`Module` gives the first for free: assign Parameters and sub-Modules as attributes
and ``params()`` walks them in assignment order.
"""

from __future__ import annotations

import contextlib
import math

import numpy

from ..backend import Backend
from ..functions import accuracy, linear, mean_squared_error, softmax_cross_entropy
from ..params import Parameter, Persistent

TASKS = ("classification", "regression")


def flat(x):
    """``x`` with every axis after the first flattened into one: images ``(N, C, H, W)``
    become rows of ``C * H * W`` features."""
    return x if x.ndim == 2 else x.reshape(len(x), -1)


class Module:
    """A container whose Parameter and Module attributes form a parameter tree (and whose
    :class:`~trainer_run.params.Persistent` attributes its state), with a mode
    (``training``) shared by the whole tree."""

    training = True
    """True in training mode, False in evaluation mode (see the module docstring)."""

    def train(self, mode: bool = True):
        """Puts this module and every sub-module in training mode (``mode=False``:
        evaluation mode); returns the module."""
        self.training = bool(mode)
        for value in vars(self).values():
            if isinstance(value, Module):
                value.train(mode)
        return self

    def eval(self):
        """Puts this module and every sub-module in evaluation mode; returns the module."""
        return self.train(False)

    def params(self, prefix: str = "") -> dict[str, Parameter]:
        """The parameters of the tree by path (``l1/W``), in assignment order."""
        return self._walk(Parameter, "params", prefix)

    def persistents(self, prefix: str = "") -> dict[str, Persistent]:
        """The persistent values of the tree by path (``bn1/avg_mean``), in assignment order."""
        return self._walk(Persistent, "persistents", prefix)

    def _walk(self, kind, method: str, prefix: str) -> dict:
        found: dict = {}
        for name, value in vars(self).items():
            if isinstance(value, kind):
                value.name = prefix + name
                found[value.name] = value
            elif isinstance(value, Module):
                found.update(getattr(value, method)(prefix + name + "/"))
        return found


def set_mode(model, training: bool) -> None:
    """Puts ``model`` in training (True) or evaluation (False) mode: ``model.train(training)``
    for a :class:`Module`; for another model, its ``training`` attribute if it has one."""
    if isinstance(model, Module):
        model.train(training)
    elif hasattr(model, "training"):
        model.training = training


@contextlib.contextmanager
def evaluating(model):
    """Within this block ``model`` is in evaluation mode; its mode is restored after."""
    previous = getattr(model, "training", True)
    set_mode(model, False)
    try:
        yield model
    finally:
        set_mode(model, previous)


def persistents_of(model) -> dict[str, Persistent]:
    """The persistent values of ``model`` (its ``persistents()``; none when it has no such
    method)."""
    method = getattr(model, "persistents", None)
    return dict(method()) if callable(method) else {}


def summary(model) -> dict:
    """The model's size: its class, ``parameters`` (the number of trained values), ``bytes``
    and, by layer (a parameter path without its last part: ``l1`` for ``l1/W``), ``layers``:
    the parameters of each, in the order of ``params()``."""
    layers: dict[str, int] = {}
    total = nbytes = 0
    for path, param in model.params().items():
        layer = path.rpartition("/")[0] or path
        layers[layer] = layers.get(layer, 0) + int(param.data.size)
        total += int(param.data.size)
        nbytes += int(param.data.nbytes)
    return {"class": type(model).__name__, "parameters": total, "bytes": nbytes, "layers": layers}


class Linear(Module):
    """``y = x @ W.T + b``; W is LeCun-normal (std ``1/sqrt(in_size)``), b is zero."""

    def __init__(self, in_size: int, out_size: int, backend: Backend, dtype="float32"):
        scale = 1.0 / math.sqrt(in_size)
        w = backend.rng.standard_normal((out_size, in_size), dtype=numpy.float64) * scale
        self.W = Parameter(backend.asarray(w, dtype=dtype))
        self.b = Parameter(backend.asarray(numpy.zeros(out_size), dtype=dtype))

    def __call__(self, x):
        return linear(x, self.W, self.b)


class Model(Module):
    """A predictor with a task head: ``model(x, t)`` returns the loss and metrics.

    ``task="classification"``: softmax cross entropy and accuracy against class ids.
    ``task="regression"``: mean squared error against targets.
    """

    task = "classification"

    def forward(self, x):
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def __call__(self, x, t):
        y = self.forward(x)
        if self.task == "classification":
            return {"loss": softmax_cross_entropy(y, t), "accuracy": accuracy(y, t)}
        return {"loss": mean_squared_error(y, t)}
