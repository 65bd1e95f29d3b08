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


def backward_seeded(loss, seed) -> None:
    """Back-propagates ``loss`` with the output gradient ``seed`` (a number, 1 for plain
    backward, or a 0-d array on the loss's device: a loss scale kept there)."""
    if isinstance(seed, float) and seed == 1.0:
        backward(loss)
        return
    data = as_data(loss)
    gy = array_module(data).empty_like(data)
    gy[...] = seed
    backward(loss, gy)


def add_weighted(metrics: dict, out: dict, weight: float) -> None:
    """Adds ``weight`` times each value of ``out`` (a model's metrics) into ``metrics``."""
    for key, value in out.items():
        value = as_data(value)
        metrics[key] = value * weight if key not in metrics else metrics[key] + value * weight
