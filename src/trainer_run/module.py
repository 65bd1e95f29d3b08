"""The model tree: :class:`Module` (parameters, persistent state and sub-modules as attributes,
found by path), the training and evaluation modes, saved arrays loaded into a model
(:func:`load_arrays`), and the size of a model.

The model protocol (what the training loop needs from any model) is in
:mod:`trainer_run.models`.
"""

from __future__ import annotations

import contextlib
from typing import Mapping

from .params import Parameter, Persistent, copy_params


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


def load_arrays(model, arrays: Mapping) -> None:
    """Copies saved ``arrays`` (path -> array: a ``model.npz``'s, a checkpoint's main model)
    into ``model``'s parameters and persistent values in place, after checking that each is
    there with its shape: KeyError / ValueError name the first that is not, and nothing is
    copied then."""
    copy_params({**model.params(), **persistents_of(model)}, arrays)


def layer_of(path: str) -> str:
    """The layer of a parameter path, as the model table groups them: the path without its
    last part (``l1`` for ``l1/W``; a path of one part is its own layer)."""
    return path.rpartition("/")[0] or path


def summary(model) -> dict:
    """The model's size: its class, ``parameters`` (the number of values), ``bytes`` and, by
    layer (:func:`layer_of`), ``layers``: the values of each, in the order of ``params()``.

    How the parameters train, where any differs from the plain rule (absent otherwise):
    ``trained`` (the values an update changes) and ``frozen`` (the paths of the frozen
    parameters, ``requires_grad`` False) when any is frozen; ``lr_mult`` and ``wd_mult``
    (path -> multiplier) for the trained parameters whose multiplier is not 1; and
    ``training``, the model table's note for each layer concerned (:func:`training_notes`)."""
    params = model.params()
    layers: dict[str, int] = {}
    total = nbytes = 0
    for path, param in params.items():
        layer = layer_of(path)
        layers[layer] = layers.get(layer, 0) + int(param.data.size)
        total += int(param.data.size)
        nbytes += int(param.data.nbytes)
    out = {"class": type(model).__name__, "parameters": total, "bytes": nbytes, "layers": layers}
    frozen = [path for path, p in params.items() if not getattr(p, "requires_grad", True)]
    if frozen:
        out["trained"] = sum(int(p.data.size) for path, p in params.items() if path not in frozen)
        out["frozen"] = frozen
    for key in ("lr_mult", "wd_mult"):
        values = {path: float(getattr(p, key, 1.0)) for path, p in params.items()
                  if path not in frozen and getattr(p, key, 1.0) != 1.0}
        if values:
            out[key] = values
    notes = training_notes(params)
    if notes:
        out["training"] = notes
    return out


def training_notes(params: Mapping) -> dict[str, str]:
    """layer -> how its parameters train, for each layer with a frozen parameter or a
    multiplier other than 1: ``frozen`` (or ``lr_mult=10 wd_mult=0``) when every parameter of
    the layer is so, else each such parameter's (``b frozen``, ``W lr_mult=10``)."""
    words: dict[str, dict[str, str]] = {}
    for path, p in params.items():
        if not getattr(p, "requires_grad", True):
            note = "frozen"
        else:
            note = " ".join(f"{key}={getattr(p, key, 1.0):g}" for key in ("lr_mult", "wd_mult")
                            if getattr(p, key, 1.0) != 1.0)
        words.setdefault(layer_of(path), {})[path] = note
    notes = {}
    for layer, by_path in words.items():
        kinds = set(by_path.values())
        if kinds == {""}:
            continue
        notes[layer] = kinds.pop() if len(kinds) == 1 else ", ".join(
            f"{path[len(layer) + 1:] or path} {note}" for path, note in by_path.items() if note)
    return notes
