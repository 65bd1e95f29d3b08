"""Datasets: the protocol, array-backed datasets, splits, and synthetic sets.

The dataset protocol is Chainer's: ``len(dataset)`` and ``dataset[i]`` returning one
example, a tuple of arrays (e.g. ``(x, t)``). Anything with those two works with the
iterators and converter.

Synthetic sets are generated from a seed, so a run's data is fixed by its config:

- ``spirals``: two interleaved spirals in 2-D, 2 classes (the default; not linearly
  separable, an MLP reaches > 95% accuracy).
- ``blobs``: Gaussian clusters in ``n_features`` dimensions, ``n_classes`` classes.
- ``regression``: ``y = x @ w + noise`` with a random ``w``, ``n_targets`` outputs.
- ``mnist_like``: MNIST-shaped classification (784 features in [0, 1], 10 classes), made
  of noisy class prototypes; for benchmarks with realistic shapes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy

from .errors import ConfigError, check, check_number


class ArrayDataset:
    """Examples ``(arrays[0][i], arrays[1][i], ...)`` over arrays of equal length."""

    def __init__(self, *arrays):
        check(len(arrays) > 0, "ArrayDataset needs at least one array")
        n = len(arrays[0])
        check(all(len(a) == n for a in arrays), "ArrayDataset arrays must have equal lengths")
        self.arrays = arrays

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)

    def take(self, indices):
        """Rows ``indices`` of every array, as a tuple of stacked arrays (fast batching)."""
        return tuple(a[indices] for a in self.arrays)


class SubDataset:
    """The examples of ``dataset`` at positions ``order`` (a view, no copy of examples)."""

    def __init__(self, dataset, order):
        self.dataset = dataset
        self.order = numpy.asarray(order)

    def __len__(self):
        return len(self.order)

    def __getitem__(self, index):
        return self.dataset[int(self.order[index])]

    def take(self, indices):
        """Rows ``indices`` as a tuple of stacked arrays."""
        if hasattr(self.dataset, "take"):
            return self.dataset.take(self.order[indices])
        examples = [self[int(i)] for i in indices]
        return tuple(numpy.stack(column) for column in zip(*examples))


def split_random(dataset, first_size: int, rng: numpy.random.Generator):
    """Splits ``dataset`` at random into ``first_size`` and the rest (Chainer's rule)."""
    n = len(dataset)
    check(0 < first_size < n, f"cannot split {n} examples into {first_size} and {n - first_size}")
    order = rng.permutation(n)
    return SubDataset(dataset, order[:first_size]), SubDataset(dataset, order[first_size:])


@dataclass
class Data:
    """A train/validation pair and what a model needs to know about it."""

    train: object
    val: object
    in_size: int
    out_size: int
    task: str


def spirals(size: int, rng, noise: float = 0.2, turns: float = 1.5):
    """Two interleaved spirals: ``size`` points in 2-D with labels 0 and 1."""
    n = check_number("size", size, low=2, integer=True)
    half = n // 2
    r = numpy.sqrt(rng.random(n)) * turns * 2 * numpy.pi
    labels = numpy.arange(n) >= half
    angle = r + numpy.pi * labels
    x = numpy.stack([r * numpy.cos(angle), r * numpy.sin(angle)], axis=1) / (turns * numpy.pi)
    x += rng.normal(0, noise / (turns * numpy.pi), size=x.shape)
    return x.astype(numpy.float32), labels.astype(numpy.int32)


def blobs(size: int, rng, n_features: int = 2, n_classes: int = 3, spread: float = 1.0):
    """Gaussian clusters around random centres, ``n_classes`` classes."""
    n = check_number("size", size, low=2, integer=True)
    centres = rng.normal(0, 4.0, size=(n_classes, n_features))
    labels = rng.integers(0, n_classes, size=n)
    x = centres[labels] + rng.normal(0, spread, size=(n, n_features))
    return x.astype(numpy.float32), labels.astype(numpy.int32)


def regression(size: int, rng, n_features: int = 8, n_targets: int = 1, noise: float = 0.1):
    """``y = x @ w + noise`` with standard normal inputs and a random ``w``."""
    n = check_number("size", size, low=2, integer=True)
    w = rng.normal(0, 1, size=(n_features, n_targets))
    x = rng.normal(0, 1, size=(n, n_features))
    y = x @ w + rng.normal(0, noise, size=(n, n_targets))
    return x.astype(numpy.float32), y.astype(numpy.float32)


def mnist_like(size: int, rng, n_features: int = 784, n_classes: int = 10, noise: float = 0.3):
    """MNIST-shaped data: noisy copies of random class prototypes, values in [0, 1]."""
    n = check_number("size", size, low=2, integer=True)
    prototypes = rng.random((n_classes, n_features)) < 0.2
    labels = rng.integers(0, n_classes, size=n)
    x = prototypes[labels].astype(numpy.float32)
    x += rng.normal(0, noise, size=x.shape).astype(numpy.float32)
    numpy.clip(x, 0, 1, out=x)
    return x, labels.astype(numpy.int32)


GENERATORS = {"spirals": spirals, "blobs": blobs, "regression": regression, "mnist_like": mnist_like}


def make_synthetic(name: str, size: int, val_fraction: float, rng, **options) -> Data:
    """Generates the synthetic set ``name`` with ``size`` examples and splits off validation."""
    if name not in GENERATORS:
        raise ConfigError(f"name={name!r} is unknown; choose one of {', '.join(GENERATORS)}")
    generator = GENERATORS[name]
    try:
        arrays = generator(size, rng, **options)
    except TypeError as e:
        raise ConfigError(f"name={name}: {e}") from None
    return to_data(arrays, val_fraction, rng, declared_classes(generator, options))


def declared_classes(factory, options: dict) -> int | None:
    """The number of classes a dataset callable was asked for: its ``n_classes`` argument as
    given in ``options``, else that argument's default; None when it has no such argument
    (the labels then tell, see :func:`to_data`)."""
    if "n_classes" in options:
        return options["n_classes"]
    parameter = inspect.signature(factory).parameters.get("n_classes")
    return None if parameter is None or parameter.default is parameter.empty else parameter.default


def to_data(result, val_fraction: float, rng, n_classes: int | None = None) -> Data:
    """What a dataset callable returned, as :class:`Data`: a ``Data`` as it is; a pair of
    NumPy arrays ``(x, t)`` split at random (``rng``) into training and ``val_fraction`` of
    the examples for validation; any other pair as ``(train, val)`` datasets. Integer labels
    make a classification task with ``n_classes`` classes (None: the largest label + 1),
    float targets a regression task with one output per target column."""
    if isinstance(result, Data):
        return result
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ConfigError("_target_ must return a trainer_run.datasets.Data, a pair of arrays "
                          "(x, t) or a (train, val) pair of datasets")
    if all(isinstance(a, numpy.ndarray) for a in result):
        return _split(*result, val_fraction, rng, n_classes)
    train, val = result
    x, t = train[0][0], train[0][1]
    if numpy.asarray(t).dtype.kind in "iu":
        classes = n_classes or int(max(int(train[i][1]) for i in range(len(train)))) + 1
        return Data(train, val, int(numpy.size(x)), classes, "classification")
    return Data(train, val, int(numpy.size(x)), int(numpy.size(t)), "regression")


def _split(x, t, val_fraction: float, rng, n_classes: int | None) -> Data:
    check(len(x) == len(t), f"the inputs have {len(x)} examples and the labels {len(t)}")
    size = len(x)
    check_number("val_fraction", val_fraction, low=0, high=1, low_open=True)
    n_val = max(1, int(round(size * val_fraction)))
    check(n_val < size, f"val_fraction={val_fraction} leaves no training examples")
    val, train = split_random(ArrayDataset(x, t), n_val, rng)
    if t.dtype.kind == "f":
        return Data(train, val, x.shape[1], t.shape[1], "regression")
    return Data(train, val, x.shape[1], n_classes or int(t.max()) + 1, "classification")
