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
from ..user_code import blame, broke, is_ours


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


class UserDataset:
    """A dataset of the user's code (``len(dataset)`` and ``dataset[i]``) as a run reads it:
    what it raises is a UserCodeError naming it by ``key`` and its class, the user's traceback
    kept (:func:`trainer_run.user_code.blame`), and an example that is not a tuple of the
    first example's length and shapes is refused in one line naming the example. Datasets made
    with one ``reference`` (a ``(train, val)`` pair) share their first example's shapes."""

    def __init__(self, dataset, key: str = "dataset", reference: list | None = None):
        self.dataset, self.key = dataset, key
        self.reference = [] if reference is None else reference

    def __len__(self):
        with blame(self.key, self.dataset):
            return len(self.dataset)

    def __getitem__(self, index):
        with blame(self.key, self.dataset):
            example = self.dataset[index]
        shapes = shapes_of(example)
        if not self.reference:
            self.reference.append(shapes)
        elif shapes != self.reference[0]:
            raise broke(self.key, self.dataset, "__getitem__", f"returned example {index} of "
                        f"another shape than the first: {_shown(shapes)} where the first has "
                        f"{_shown(self.reference[0])}; every example must be a tuple of arrays "
                        "of the same shapes, the label last")
        return example


class UserRows(UserDataset):
    """A :class:`UserDataset` whose dataset has its own ``take(indices)``, called the same way."""

    def take(self, indices):
        with blame(self.key, self.dataset, "take"):
            return self.dataset.take(indices)


def of_user(dataset, key: str = "dataset", reference: list | None = None):
    """``dataset`` as a :class:`UserDataset` (a :class:`UserRows` when it has ``take``)."""
    kind = UserRows if hasattr(dataset, "take") else UserDataset
    return kind(dataset, key, reference)


def of_loader(result, key: str = "dataset"):
    """A loader's ``result`` with the datasets of the user's code in it (one, or a
    ``(train, val)`` pair, whose first examples are tuples) as :class:`UserDataset`; anything
    else as it is (the rules of :mod:`trainer_run.data.prepare` refuse what is not data)."""
    pair = isinstance(result, tuple) and len(result) == 2 and all(map(_of_user, result))
    if not pair and not _of_user(result):
        return result
    reference: list = []
    wrapped = [of_user(d, key, reference) for d in (result if pair else (result,))]
    if not all(len(w) > 0 and isinstance(w[0], tuple) for w in wrapped):
        return result
    return tuple(wrapped) if pair else wrapped[0]


def _of_user(value) -> bool:
    return (hasattr(value, "__len__") and hasattr(value, "__getitem__")
            and not hasattr(value, "dtype") and not isinstance(value, (dict, str, bytes, tuple))
            and not is_ours(value))


def shapes_of(example):
    """An example's parts' shapes (a tuple's), or its type's name when it is not a tuple."""
    if not isinstance(example, tuple):
        return type(example).__name__
    return tuple(tuple(numpy.shape(part)) for part in example)


def _shown(shapes) -> str:
    if isinstance(shapes, str):
        return f"a {shapes}"
    return f"parts of shapes {', '.join(map(str, shapes))}"


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


@dataclass(frozen=True)
class Use:
    """What a loader that takes a ``use`` argument is told of how its data will be used:
    ``folder`` is the run's folder, where a loader may keep what it derived from the data (a
    text's tokens, its tokenizer) and find it again on resume (None: no folder);
    ``writable`` says whether it may write there (a run's own folder) or only read it (a run
    evaluated or loaded); ``evaluated`` names the split ``trainer-eval`` measures (None: a run
    trains)."""

    folder: object = None
    writable: bool = False
    evaluated: str | None = None


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
    (:func:`trainer_run.data.raw_inputs.describe`; ``{}`` when unknown); ``tokenizer`` turns a
    text's tokens into text and back (:mod:`trainer_run.data.tokenizers`; None for data that
    is not text), and is kept with the run.
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
    tokenizer: object = None

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
