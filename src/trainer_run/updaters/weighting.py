"""Weighting the batches of one update: each batch's gradients and metrics count by its share
of the update's examples (see :class:`~trainer_run.updaters.StandardUpdater`)."""

from __future__ import annotations

from ..autograd import as_data, backward
from ..backend import array_module
from ..errors import check_number


def batches_per_update(accum_grad) -> int:
    """``accum_grad``, the batches whose gradients make one update: an integer >= 1."""
    return check_number("accum_grad", accum_grad, low=1, integer=True)


def examples_in(in_arrays) -> int:
    """Examples in a converted batch (the length of its first array)."""
    if isinstance(in_arrays, tuple):
        return len(in_arrays[0])
    if isinstance(in_arrays, dict):
        return len(next(iter(in_arrays.values())))
    return len(in_arrays)


def backward_seeded(loss, seed: float) -> None:
    """Back-propagates ``loss`` with the output gradient ``seed`` (1: plain backward)."""
    if seed == 1.0:
        backward(loss)
    else:
        data = as_data(loss)
        backward(loss, array_module(data).full_like(data, seed))


def add_weighted(metrics: dict, out: dict, weight: float) -> None:
    """Adds ``weight`` times each value of ``out`` (a model's metrics) into ``metrics``."""
    for key, value in out.items():
        value = as_data(value)
        metrics[key] = value * weight if key not in metrics else metrics[key] + value * weight
