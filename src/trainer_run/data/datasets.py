"""The dataset protocol, array-backed datasets, subsets and splits, and the two records a run's
data passes through: :class:`Splits` (what a loader read) and :class:`Data` (what the run
trains on).

The dataset protocol is Chainer's: ``len(dataset)`` and ``dataset[i]`` returning one
example, a tuple of arrays (e.g. ``(x, t)``). Anything with those two works with the
iterators and converter; a dataset that also has ``take(indices)`` gives a whole batch with
one indexed read per array.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy

from ..errors import check


class ArrayDataset:
    """Examples ``(arrays[0][i], arrays[1][i], ...)`` over arrays of equal length (in memory
    or memory-mapped)."""

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
        """Rows ``indices`` of every array, as a tuple of stacked arrays: one indexed read per
        array."""
        return tuple([a[indices] for a in self.arrays])


class SubDataset:
    """The examples of ``dataset`` at positions ``order`` (a view, no copy of examples)."""

    wraps = True
    """Its ``take`` is ``dataset``'s (:func:`trainer_run.data.worker_processes.reads_rows`)."""

    def __init__(self, dataset, order):
        self.dataset = dataset
        self.order = numpy.asarray(order)

    def __len__(self):
        return len(self.order)

    def __getitem__(self, index):
        return self.dataset[int(self.order[index])]

    def take(self, indices):
        """Rows ``indices`` as a tuple of stacked arrays."""
        return take(self.dataset, self.order[indices])


def take(dataset, indices) -> tuple:
    """Rows ``indices`` of ``dataset`` as a tuple of stacked arrays: its own ``take`` when it
    has one, else its examples ``dataset[i]`` stacked part by part."""
    if hasattr(dataset, "take"):
        return dataset.take(indices)
    return tuple(numpy.stack(column) for column in zip(*(dataset[int(i)] for i in indices)))


def split_random(dataset, first_size: int, rng: numpy.random.Generator):
    """Splits ``dataset`` at random into ``first_size`` and the rest (Chainer's rule)."""
    n = len(dataset)
    check(0 < first_size < n, f"cannot split {n} examples into {first_size} and {n - first_size}")
    order = rng.permutation(n)
    return SubDataset(dataset, order[:first_size]), SubDataset(dataset, order[first_size:])


def stratified_positions(labels, first_size: int, rng: numpy.random.Generator):
    """Positions of a random split of ``labels`` into ``first_size`` and the rest in which every
    class keeps its share: class ``c`` with ``n_c`` examples gives ``floor(n_c * f)`` of them
    to the first part (``f = first_size / n``) and the remaining places go to the classes
    with the largest remainders. Both parts come back sorted (reads in file order)."""
    labels = numpy.asarray(labels)
    n = len(labels)
    check(0 < first_size < n, f"cannot split {n} examples into {first_size} and {n - first_size}")
    order = rng.permutation(n)
    order = order[numpy.argsort(labels[order], kind="stable")]  # by class, random within
    classes, starts, counts = numpy.unique(labels[order], return_index=True, return_counts=True)
    share = counts * (first_size / n)
    taken = numpy.floor(share).astype(numpy.int64)
    extra = first_size - int(taken.sum())
    taken[numpy.argsort(-(share - taken), kind="stable")[:extra]] += 1
    first = numpy.concatenate([order[s:s + k] for s, k in zip(starts, taken)])
    mask = numpy.ones(n, bool)
    mask[first] = False
    return numpy.sort(first), numpy.flatnonzero(mask)


@dataclass
class Splits:
    """What a loader read, before the run's rules apply (see :mod:`trainer_run.data.prepare`).

    Each split is a tuple of arrays of equal length, one per part of an example, the labels
    last (``(x, y)``); arrays may be memory-mapped. ``val`` is None when the loader has no
    validation split (``dataset.val_fraction`` then takes one from ``train``), ``test`` when
    it has no held-out test split. ``origin`` names where each split came from (a file, a
    generator) for messages; labels may be integers, floats or strings (class names).
    ``classes`` names integer class ids when the loader knows their names (CIFAR-10's).
    ``files`` records the files read, by role (their path and checksums, for ``data.json``);
    ``notes`` are lines the run shows (``note: ...``) before training.
    """

    train: tuple
    val: tuple | None = None
    test: tuple | None = None
    origin: dict = field(default_factory=dict)
    classes: list | None = None
    files: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def source(self, split: str) -> str:
        """Where ``split`` came from, for a message."""
        return self.origin.get(split) or self.origin.get("train") or "the dataset"


@dataclass
class Data:
    """What a run trains on: the training, validation and (optional) test datasets and what a
    model needs to know about them.

    ``in_shape`` is the shape of one input example (``(C, H, W)`` for images), ``out_size``
    the number of classes or of regression targets, ``task`` ``"classification"`` or
    ``"regression"``. ``classes`` names the class ids when the labels were names; ``note``
    says how the task was chosen; ``normalization`` holds the values the inputs were
    normalized with (``{}`` for none); ``files`` records the files read (:class:`Splits`'s);
    ``raw_inputs`` describes the training inputs as read, before normalization
    (:func:`trainer_run.data.raw_inputs.describe`; ``{}`` when unknown).
    """

    train: object
    val: object
    in_shape: tuple
    out_size: int
    task: str
    test: object = None
    classes: list | None = None
    note: str = ""
    normalization: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    raw_inputs: dict = field(default_factory=dict)

    @property
    def in_size(self) -> int:
        """Features per example: the product of ``in_shape``."""
        return math.prod(self.in_shape)

    def overfit(self, examples: int) -> Data:
        """The same data with only the first ``examples`` training examples, which are the
        validation split too, so that validation shows how well they were learned (Lightning's
        ``overfit_batches``); the test split stays."""
        check(0 < examples <= len(self.train), f"overfit takes the first {examples} training "
              f"examples; the training split has {len(self.train)}")
        train = SubDataset(self.train, numpy.arange(examples))
        return dataclasses.replace(self, train=train, val=train)
