"""Training batches transformed by ``dataset.transforms``: which random draws a batch gets.

An :class:`Augmentation` applies its transforms in order to each part of each training batch
(the part one replica of one worker trains on). The generator it hands them is made afresh for
each part from the run's seed and the part's *key*: the worker's rank, the training iterator's
epoch and position before the batch was drawn (:func:`batch_key`, which names each batch of a
run once), and the part's replica. A batch's draws are therefore a function of the run's seed
and of the iterator's state, which every checkpoint holds: a resumed run, a run gathering ahead
(``updater.prefetch``) or in several workers (``dataset.workers``) transforms every batch
exactly as an uninterrupted serial run does, and no other generator state needs keeping.
Evaluation, ``trainer-eval`` and ``predict`` never see the transforms.
"""

from __future__ import annotations

import difflib
import functools

import numpy

from .. import targets
from ..errors import ConfigError
from ..user_code import blame, name_of
from .transforms import BUILT_IN

KIND = targets.Kind("a transform: a callable of (batch, rng) returning the batch",
                    fits=callable)


class Augmentation:
    """``transforms`` (callables of ``(batch, rng)``), applied in order, with generators
    spawned from ``seed`` (a ``numpy.random.SeedSequence``) for the worker ``rank``."""

    def __init__(self, transforms: list, seed: numpy.random.SeedSequence, rank: int = 0):
        self.transforms, self.seed, self.rank = list(transforms), seed, rank

    def for_worker(self, rank: int) -> Augmentation:
        """The same transforms drawing worker ``rank``'s generators."""
        return Augmentation(self.transforms, self.seed, rank)

    def generator(self, key: tuple) -> numpy.random.Generator:
        """The generator of the part ``key`` (``batch_key`` of its batch and its replica)."""
        child = numpy.random.SeedSequence(self.seed.entropy,
                                          spawn_key=(*self.seed.spawn_key, self.rank, *key))
        return numpy.random.Generator(numpy.random.PCG64(child))

    def __call__(self, batch, key: tuple):
        """``batch`` (a tuple of arrays, inputs first and labels last) transformed with the
        generator of ``key``."""
        return self.applied(batch, self.generator(key))

    def try_on(self, batch) -> None:
        """Transforms ``batch`` (a few examples) once, with a generator of its own, so that a
        transform that does not fit the data fails before training starts."""
        self.applied(batch, numpy.random.default_rng(0))

    def applied(self, batch, rng: numpy.random.Generator):
        """``batch`` through every transform in order, drawing from ``rng``; what a user's
        transform raises names its entry of ``dataset.transforms``."""
        if not isinstance(batch, tuple):
            raise ConfigError(f"dataset.transforms take batches as tuples of arrays (x, ..., t); "
                              f"this run's converter gives {type(batch).__name__}: leave "
                              "dataset.transforms out or return a tuple")
        for index, transform in enumerate(self.transforms):
            with blame(f"dataset.transforms[{index}]", transform):
                batch = tuple(transform(batch, rng))
        return batch


def batch_key(iterator) -> tuple:
    """The key of the batch ``iterator`` draws next: its epoch and position (read before the
    draw). Within a run no two batches share one."""
    return int(iterator.epoch), int(iterator.current_position)


def build(entries, seed: numpy.random.SeedSequence, standard: dict) -> Augmentation | None:
    """The augmentation of ``dataset.transforms`` (``entries``; empty or null: None). An entry
    is a built-in's name (a key of :data:`.transforms.BUILT_IN`, ``random_crop``: its class
    with its defaults, as the mapping with the class's dotted path as ``_target_``), or a
    mapping with a ``_target_`` (a built-in's dotted path, or a callable of the user's) and its
    arguments: a class is built with them and its instances are the transform; a function is
    the transform itself, called with ``(batch, rng)`` and them as keyword arguments (as
    ``metrics=`` calls a user's function), unless ``_partial_`` says otherwise. ``standard``:
    the arguments the runner supplies when a transform takes them (``classes``, ``task``)."""
    if not entries:
        return None
    if not isinstance(entries, (list, tuple)):
        raise ConfigError(f"dataset.transforms must be a list of transform names or mappings "
                          f"with _target_, got {entries!r}")
    return Augmentation([_transform(i, entry, standard) for i, entry in enumerate(entries)],
                        seed)


def _transform(index: int, entry, standard: dict):
    key = f"dataset.transforms[{index}]"
    if isinstance(entry, str):
        if entry not in BUILT_IN:
            close = difflib.get_close_matches(entry, list(BUILT_IN), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"{key}={entry!r} is not a built-in transform; {hint}choose one of "
                              f"{', '.join(BUILT_IN)}, or give a mapping with _target_")
        entry = {targets.TARGET: name_of(BUILT_IN[entry])}
    if not isinstance(entry, dict) or not entry.get(targets.TARGET):
        raise ConfigError(f"{key} must be a built-in transform's name ({', '.join(BUILT_IN)}) or "
                          f"a mapping with _target_, got {entry!r}")
    entry = dict(entry)
    if entry.get(targets.PARTIAL, False) is not False:
        return targets.instantiate(key, entry, standard, kind=KIND)
    factory, kwargs, fixed = targets.arguments(key, entry, standard, kind=KIND)
    if isinstance(factory, type):
        return targets.call(key, factory, kwargs, kind=KIND, target=entry[targets.TARGET], **fixed)
    targets.check_call(key, factory, {**kwargs, **fixed}, ("batch", "rng"), "a transform takes "
                       "the batch and the generator, then the entry's other keys")
    return functools.partial(factory, **kwargs, **fixed)
