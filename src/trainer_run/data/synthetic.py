"""Synthetic sets, generated from a seed, so a run's data is fixed by its config:

- ``spirals``: two interleaved spirals in 2-D, 2 classes (the default; not linearly
  separable, an MLP reaches > 95% accuracy).
- ``blobs``: Gaussian clusters in ``n_features`` dimensions, ``n_classes`` classes.
- ``regression``: ``y = x @ w + noise`` with a random ``w``, ``n_targets`` outputs.
- ``mnist_like``: MNIST-shaped classification (784 features in [0, 1], 10 classes), made
  of noisy class prototypes; for benchmarks with realistic shapes.

Each takes ``size`` (examples in all) and the data's generator ``rng`` and returns ``(x, t)``;
a ``size`` whose arrays (estimated at :data:`BYTES_PER_VALUE` per value while they are drawn)
exceed the machine's available memory is refused before anything is drawn
(:func:`trainer_run.memory.check_fits`).
"""

from __future__ import annotations

import numpy

from ..errors import check_number
from ..memory import check_fits

BYTES_PER_VALUE = 32
"""The memory one value of an example takes while a set is drawn: float64 draws, their
temporaries and the float32 result."""

RULES = {
    "size": {"low": 2, "integer": True},
    "n_features": {"low": 1, "integer": True},
    "n_classes": {"low": 2, "integer": True},
    "n_targets": {"low": 1, "integer": True},
    "noise": {"low": 0},
    "spread": {"low": 0},
    "turns": {"low": 0, "low_open": True},
}
"""Each option's rule (:func:`trainer_run.errors.check_number`'s bounds), the same in every
generator that takes it."""


def _checked(**options) -> list:
    """The values of ``options``, each checked by its rule in :data:`RULES`, in the order
    given: the first one out of range raises its :class:`~trainer_run.errors.ConfigError`."""
    return [check_number(name, value, **RULES[name]) for name, value in options.items()]


def _check_fits(n: int, values: int) -> None:
    """Refuses ``n`` examples of ``values`` values each (the label included) that the
    machine's available memory cannot hold."""
    check_fits(n * values * BYTES_PER_VALUE, f"size={n} ({n} examples of {values} values)",
               "lower dataset.size")


def spirals(size: int, rng, noise: float = 0.2, turns: float = 1.5):
    """Two interleaved spirals: ``size`` points in 2-D with labels 0 and 1."""
    n, noise, turns = _checked(size=size, noise=noise, turns=turns)
    _check_fits(n, 3)
    half = n // 2
    r = numpy.sqrt(rng.random(n)) * turns * 2 * numpy.pi
    labels = numpy.arange(n) >= half
    angle = r + numpy.pi * labels
    x = numpy.stack([r * numpy.cos(angle), r * numpy.sin(angle)], axis=1) / (turns * numpy.pi)
    x += rng.normal(0, noise / (turns * numpy.pi), size=x.shape)
    return x.astype(numpy.float32), labels.astype(numpy.int32)


def blobs(size: int, rng, n_features: int = 2, n_classes: int = 3, spread: float = 1.0):
    """Gaussian clusters around random centres, ``n_classes`` classes."""
    n, n_features, n_classes, spread = _checked(size=size, n_features=n_features,
                                                n_classes=n_classes, spread=spread)
    _check_fits(n, n_features + 1)
    centres = rng.normal(0, 4.0, size=(n_classes, n_features))
    labels = rng.integers(0, n_classes, size=n)
    x = centres[labels] + rng.normal(0, spread, size=(n, n_features))
    return x.astype(numpy.float32), labels.astype(numpy.int32)


def regression(size: int, rng, n_features: int = 8, n_targets: int = 1, noise: float = 0.1):
    """``y = x @ w + noise`` with standard normal inputs and a random ``w``."""
    n, n_features, n_targets, noise = _checked(size=size, n_features=n_features,
                                               n_targets=n_targets, noise=noise)
    _check_fits(n, n_features + n_targets)
    w = rng.normal(0, 1, size=(n_features, n_targets))
    x = rng.normal(0, 1, size=(n, n_features))
    y = x @ w + rng.normal(0, noise, size=(n, n_targets))
    return x.astype(numpy.float32), y.astype(numpy.float32)


def mnist_like(size: int, rng, n_features: int = 784, n_classes: int = 10, noise: float = 0.3):
    """MNIST-shaped data: noisy copies of random class prototypes, values in [0, 1]."""
    n, n_features, n_classes, noise = _checked(size=size, n_features=n_features,
                                               n_classes=n_classes, noise=noise)
    _check_fits(n, n_features + 1)
    prototypes = rng.random((n_classes, n_features)) < 0.2
    labels = rng.integers(0, n_classes, size=n)
    x = prototypes[labels].astype(numpy.float32)
    x += rng.normal(0, noise, size=x.shape).astype(numpy.float32)
    numpy.clip(x, 0, 1, out=x)
    return x, labels.astype(numpy.int32)
