"""The trained model's parameters in a run's checkpoint: the one place that knows where a
checkpoint's state keeps them (:mod:`trainer_run.checkpoint` stores any tree and knows no
layout).

A run's checkpoint (:data:`trainer_run.checkpoint.RUN_STATE`) holds the Trainer's state
under ``trainer``; the Trainer keeps its updater's under ``updater``
(:meth:`~trainer_run.training.Trainer.state_dict`); an updater
(:class:`~.standard.StandardUpdater` and its subclasses) keeps each model's parameters and
persistent values, as host arrays by path, under ``models`` by the model's name, the trained
one under ``main``.
"""

from __future__ import annotations

from pathlib import Path

import numpy

from .. import checkpoint
from ..module import load_arrays

PATH = ("trainer", "updater", "models", "main")
"""Where a run checkpoint's state keeps the main model's arrays."""


def main_params(state: dict, source="the state") -> dict:
    """The main model's arrays (path -> array: parameters and persistent values) in
    ``state``, a run checkpoint's state tree (:func:`trainer_run.checkpoint.load`'s). Raises
    :class:`~trainer_run.checkpoint.CheckpointError` naming ``source`` and the path when they
    are not there."""
    node = state
    for key in PATH:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or not all(isinstance(v, numpy.ndarray) for v in node.values()):
        raise checkpoint.CheckpointError(f"checkpoint {source} holds no model parameters "
                                         f"(no {'/'.join(PATH)})")
    return node


def load_main_params(model, path) -> None:
    """Loads the main model's parameters (and persistent values) of the checkpoint directory
    ``path`` into ``model`` (anything with ``params()``) in place. Raises
    :class:`~trainer_run.checkpoint.CheckpointError` for a checkpoint that cannot be read or
    holds no model parameters, and ValueError / KeyError naming the first parameter that is
    missing or has another shape (:func:`~trainer_run.module.load_arrays`)."""
    path = Path(path)
    load_arrays(model, main_params(checkpoint.load(path), path))
