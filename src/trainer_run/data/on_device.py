"""A split copied onto the device once, its batches gathered and normalized there
(``dataset.on_device``).

On a GPU, the host pipeline gathers each batch in host memory, normalizes it there and copies
it over: a host-side gather, a conversion and a transfer per batch. A split that fits on the
device is instead copied there once, as stored (uint8 images stay uint8, a quarter of their
float32 size), with its normalization values; a batch is then one indexed read on the device
and the normalization (:func:`.input_scaling.transform`) runs there. The iterator still draws
the indices on the host, so the batches, their order and their values are those of the host
pipeline, and checkpoints and resume do not change.

``dataset.on_device``: null (the default) copies the training and validation splits on CuPy
when their raw arrays take under a quarter of the GPU's memory and no batches are prefetched;
true copies them on any backend (on NumPy: into memory, which reads a memory-mapped file
whole); false never does.
"""

from __future__ import annotations

import dataclasses

import numpy

from .. import devices
from ..errors import ConfigError
from .datasets import take
from .input_scaling import Normalized, transform
from .text_windows import Windows

SHARE = 4
"""The splits go onto a GPU when their raw arrays take under 1 / SHARE of its memory."""


class OnDevice:
    """``dataset`` (a split; :class:`.input_scaling.Normalized` or plain) with its raw rows
    and normalization values on ``backend``'s device. ``take`` gathers and normalizes there;
    ``dataset[i]`` is the host split's example (for a converter of the user's)."""

    def __init__(self, dataset, backend):
        raw, values = _stored(dataset)
        self.host, self.backend = dataset, backend
        with backend.activate():
            self.arrays = tuple(backend.asarray(a) for a in take(raw, numpy.arange(len(raw))))
            self.values = {k: backend.asarray(v) if isinstance(v, numpy.ndarray) else v
                           for k, v in values.items()}

    def __len__(self):
        return len(self.host)

    def __getitem__(self, index):
        return self.host[index]

    def take(self, indices):
        """Rows ``indices`` (host integers) of every array, on the device, the inputs
        normalized there."""
        with self.backend.activate():
            rows = self.backend.asarray(numpy.asarray(indices))
            x, *rest = (a[rows] for a in self.arrays)
            return (transform(self.values, x), *rest)


def placed(data, backend, choice: bool | None, prefetch: int, workers: int = 0, replicas: int = 1):
    """``data`` with its training and validation splits :class:`OnDevice` by ``choice``
    (``dataset.on_device``; see the module docstring), else as it is. ``prefetch`` and
    ``workers`` (``updater.prefetch``, ``dataset.workers``) gather on the host ahead of time,
    and rule it out. ``replicas``: ``updater=parallel``'s; the splits live on the main
    replica's GPU, so several GPUs keep the host pipeline."""
    if choice is not None and not isinstance(choice, bool):
        raise ConfigError(f"dataset.on_device must be true, false or null, got {choice!r}")
    for key, value in (("updater.prefetch", prefetch), ("dataset.workers", workers)):
        if choice and value:
            raise ConfigError(f"dataset.on_device=true gathers batches on the device, and "
                              f"{key}={value} gathers them on the host ahead of time: set one "
                              f"of them ({key}=0 or dataset.on_device=false)")
    prefetch = prefetch or workers
    several_gpus = backend.on_gpu and replicas > 1
    if choice and several_gpus:
        raise ConfigError(f"dataset.on_device=true keeps the data on one GPU, and "
                          f"updater.devices trains on {replicas}: set dataset.on_device=null")
    if isinstance(data.train, Windows):  # a text's windows: a batch is a few kilobytes of ids
        if choice:
            raise ConfigError("dataset.on_device=true copies examples by row, and a text's "
                              "training examples are windows of its tokens, gathered on the host: "
                              "set dataset.on_device=null")
        return data
    if choice is None:
        choice = (not prefetch and not several_gpus and backend.on_gpu
                  and _fits(data, backend))
    if not choice:
        return data
    return dataclasses.replace(data, train=OnDevice(data.train, backend),
                               val=None if data.val is None else OnDevice(data.val, backend))


def raw_bytes(dataset) -> int:
    """The bytes of ``dataset``'s rows as stored (before normalization), from its first row."""
    raw = _stored(dataset)[0]
    return len(raw) * sum(a.nbytes for a in take(raw, numpy.arange(1)))


def _stored(dataset) -> tuple:
    """The split as stored and its normalization values (``{}`` for none)."""
    if isinstance(dataset, Normalized):
        return dataset.dataset, dataset.values
    return dataset, {}


def _fits(data, backend) -> bool:
    total = devices.gpu(backend.device).memory_bytes
    held = raw_bytes(data.train) + (0 if data.val is None else raw_bytes(data.val))
    return held * SHARE < total
