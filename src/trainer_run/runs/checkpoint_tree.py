"""The trained model's parameters in a run's checkpoint: the one place that knows where a
checkpoint's state keeps them (:mod:`trainer_run.storage.checkpoint` stores any tree and knows no
layout).

A run's checkpoint (:data:`trainer_run.storage.checkpoint.RUN_STATE`) holds the Trainer's state
under ``trainer``; the Trainer keeps its updater's under ``updater``
(:meth:`~trainer_run.training.Trainer.state_dict`); an updater
(:class:`~.standard.StandardUpdater` and its subclasses) keeps each model's parameters and
persistent values, as host arrays by path, under ``models`` by the model's name, the trained
one under ``main``; the Trainer keeps its extensions' states by name under ``extensions``
(the weight averages' among them, :mod:`trainer_run.averaging`), and the run's config is
kept beside the Trainer's state under ``config``. :func:`chosen_params` reads the run's best
weights from it, :func:`check_averages` refuses averages that cannot be the run's.

It also says what a run checkpoint's content must be for a resume to use it (:func:`check`,
:func:`check_fits`): :func:`trainer_run.storage.checkpoint.find` verifies bytes and schema, these
verify meaning, so a newest checkpoint whose checksums match but whose content is wrong is
passed over like a damaged one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import numpy

from trainer_run import averaging
from trainer_run.errors import ConfigError
from trainer_run.module import persistents_of
from trainer_run.storage import checkpoint

PATH = ("trainer", "updater", "models", "main")
"""Where a run checkpoint's state keeps the main model's arrays."""
EXTENSIONS = ("trainer", "extensions")
"""Where a run checkpoint's state keeps the Trainer's extensions' states by name."""
SECTIONS = ("iterators", "optimizers", "optimizer_states", "models")
"""The objects an updater's state holds by name (:meth:`.standard.StandardUpdater.state_dict`)."""


def main_params(state: dict, source="the state") -> dict:
    """The main model's arrays (path -> array: parameters and persistent values) in
    ``state``, a run checkpoint's state tree (:func:`trainer_run.storage.checkpoint.load`'s). Raises
    :class:`~trainer_run.storage.checkpoint.CheckpointError` naming ``source`` and the path when they
    are not there."""
    node = _at(state, PATH)
    if not isinstance(node, dict) or not all(isinstance(v, numpy.ndarray) for v in node.values()):
        raise checkpoint.CheckpointError(f"checkpoint {source} holds no model parameters "
                                         f"(no {'/'.join(PATH)})")
    return node


def chosen_params(state: dict, source="the state") -> dict | None:
    """In a run checkpoint's state (:func:`trainer_run.storage.checkpoint.load`'s), the EMA
    weights the run's objective ranked (averaged parameters, in the main model's dtypes, and
    the main model's persistent values, by path), when it ranked them
    (:func:`trainer_run.averaging.chosen_average`); else None (the run's best weights are then
    the model's own, :func:`main_params`)."""
    average = averaging.chosen_average(_at(state, EXTENSIONS + (averaging.EMA,)))
    if average is None:
        return None
    main = main_params(state, source)
    return {**main, **{path: numpy.asarray(a).astype(main[path].dtype, copy=False)
                       for path, a in average.items()}}


def check_averages(state: dict, source) -> None:
    """Refuses (ConfigError, one line naming the checkpoint ``source``, the damaged entry and
    the earlier checkpoint to resume from) a run checkpoint's ``state`` whose weight averages
    cannot be the run's (:func:`trainer_run.averaging.saved_problem`)."""
    problem = averaging.saved_problem(_at(state, EXTENSIONS) or {},
                                      _at(state, ("config", "trainer")) or {},
                                      _at(state, ("trainer", "updater", "iteration")) or 0,
                                      _at(state, PATH) or {})
    if problem is None:
        return
    source = Path(source)
    earlier = [c for c in checkpoint.list_checkpoints(source.parent)
               if (checkpoint.iteration_of(c) or 0) < (checkpoint.iteration_of(source) or 0)]
    then = (f"resume from an earlier one with resume={earlier[-1]}" if earlier else
            "no earlier checkpoint is kept: start the run again")
    raise ConfigError(f"checkpoint {source} is damaged: its {'/'.join(EXTENSIONS)}/{problem}; "
                      f"{then}")


def check(tree: dict, arrays: Mapping | None = None) -> None:
    """Checks the content of a run checkpoint's JSON tree (:func:`trainer_run.storage.checkpoint.load_tree`'s,
    arrays as ``{"__array__": key}``) as far as it can be known without the model: the trainer's
    ``elapsed_time`` is a number, its updater's ``iteration`` a non-negative integer, the
    updater holds each of :data:`SECTIONS` as an object and the main model's arrays as array
    references. Raises :class:`~trainer_run.storage.checkpoint.CheckpointError` saying what is wrong
    (``arrays``, the archive's headers, is not needed: the signature of a ``find`` check)."""
    trainer = tree.get("trainer")
    updater = trainer.get("updater") if isinstance(trainer, dict) else None
    if not isinstance(updater, dict):
        raise checkpoint.CheckpointError("it holds no trainer/updater object")
    elapsed = trainer.get("elapsed_time")
    if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)):
        raise checkpoint.CheckpointError(f"its trainer/elapsed_time is {elapsed!r}, not a number")
    iteration = updater.get("iteration")
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise checkpoint.CheckpointError(f"its trainer/updater/iteration is {iteration!r}, not a "
                                         "non-negative integer")
    for section in SECTIONS:
        if not isinstance(updater.get(section), dict):
            raise checkpoint.CheckpointError(f"its trainer/updater/{section} is not an object")
    main = updater["models"].get("main")
    if not isinstance(main, dict) or not main or not all(_is_array(v) for v in main.values()):
        raise checkpoint.CheckpointError(f"its {'/'.join(PATH)} is not an object of arrays")


def check_fits(model) -> Callable[[dict, Mapping], None]:
    """A check for :func:`trainer_run.storage.checkpoint.find` (``check(tree, arrays)``, ``arrays``
    the archive's headers: key -> (shape, dtype), no array data read): :func:`check`, then
    that the main model's arrays are those of ``model`` (its parameters and persistent values,
    each present with its shape and dtype). Raises
    :class:`~trainer_run.storage.checkpoint.CheckpointError` naming the first that is not."""
    expected = {path: p.data for path, p in {**model.params(), **persistents_of(model)}.items()}

    def fits(tree: dict, arrays: Mapping) -> None:
        check(tree, arrays)
        saved = _at(tree, PATH)
        for path, value in expected.items():
            if path not in saved:
                raise checkpoint.CheckpointError(f"its main model lacks parameter {path}")
            shape, dtype = arrays[saved[path]["__array__"]]
            if tuple(shape) != tuple(value.shape):
                raise checkpoint.CheckpointError(f"its parameter {path} has shape {tuple(shape)}, "
                                                 f"the model's has {tuple(value.shape)}")
            if numpy.dtype(dtype) != numpy.dtype(value.dtype):
                raise checkpoint.CheckpointError(f"its parameter {path} is {numpy.dtype(dtype)}, "
                                                 f"the model's is {numpy.dtype(value.dtype)}")

    return fits


def _at(tree, keys: tuple):
    """The node at ``keys`` in ``tree``, or None where a key or an object on the way is missing."""
    for key in keys:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _is_array(value) -> bool:
    return isinstance(value, dict) and set(value) == {"__array__"}
