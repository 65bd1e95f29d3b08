"""From what a dataset callable returned to the :class:`~trainer_run.data.datasets.Data` a run
trains on: the task, the labels, the validation split and the inputs' normalization.

The rules, in order:

1. **Examples.** A callable returns a :class:`Splits`, arrays ``(x, ..., y)`` of equal length
   (one dataset), any one dataset (``len`` and ``[i]`` giving a tuple of arrays), a
   ``(train, val)`` pair of datasets, or a finished :class:`Data`. The labels are the last
   array; an input of shape ``(N, H, W)`` gains a channel axis, ``(N, 1, H, W)``.
2. **Task** (``dataset.task``). ``auto`` decides from the training labels' type: integers,
   booleans or strings make a classification task, floats a regression task (whole-number
   floats get a hint to set ``dataset.task=classification``). ``classification`` takes whole
   numbers of any type; ``regression`` takes numbers.
3. **Labels.** Class names (strings) become ids in sorted order (``Data.classes``); ids must
   be whole, at least 0 and below :data:`MAX_CLASSES` (and the declared class count, if
   any); there are as many classes as the largest id + 1 (with a hint line when the ids skip
   values). Every class of the validation and test splits needs training examples.
   Regression targets become float32 columns.
4. **Checks.** Arrays of one split are arrays (not Python lists) with one row per example;
   inputs are numbers (booleans, integers or floats: not strings, objects or complex
   numbers) and an example holds at least one value; float inputs hold no NaN or infinity,
   also once cast to the dtype the run reads them in (``dtype``, float32 under
   ``standardize``), where a value beyond that dtype's range would become infinity. Each
   failure is a :class:`~trainer_run.errors.ConfigError` naming the file (or the loader).
5. **Validation.** Without a validation split, ``val_fraction`` of the training examples are
   held out at random from the data's generator, stratified by class for classification.
6. **Normalization** (``dataset.normalize``, see :mod:`trainer_run.data.input_scaling`) is
   fitted on the training split only and applied to every split; the training inputs as read
   are described (dtype, range: :mod:`trainer_run.data.raw_inputs`) for prediction's check.
"""

from __future__ import annotations

import inspect

import numpy

from ..errors import ConfigError, check, check_number
from . import input_checks, input_scaling, raw_inputs
from .datasets import ArrayDataset, Data, Splits, SubDataset, of_loader, stratified_positions, take

TASKS = ("auto", "classification", "regression")
MAX_CLASSES = 1_000_000
"""The most classes a run takes: a class id must be below it (a larger id is a mistake, and
would make an output layer of that many units)."""


def prepare(result, rng, val_fraction: float = 0.2, task: str = "auto", normalize: str = "none",
            n_classes: int | None = None, origin: str = "the dataset", hold_out: bool = True,
            dtype="float32") -> Data:
    """``result`` of a dataset callable as :class:`Data` by the rules above; ``rng`` draws the
    validation split, ``n_classes`` is the class count the callable declared (None: none),
    ``origin`` names the callable for messages when ``result`` does not name its files,
    ``dtype`` is the run's compute dtype (``backend.dtype``). Without ``hold_out`` (data
    measured whole, ``trainer-eval split=all``) a result without a validation split keeps
    every example for training and gets an empty one."""
    check(task in TASKS, f"dataset.task={task!r} is unknown; choose one of {', '.join(TASKS)}")
    val_fraction = check_number("dataset.val_fraction", val_fraction, low=0, high=1, low_open=True)
    if isinstance(result, Data):
        return result
    result = of_loader(result)  # the user's datasets: what they raise or return is theirs
    splits = as_splits(result, origin)
    if splits is None:
        return _pair(result, task, n_classes, origin)
    for split in ("train", "val", "test"):
        _check_rows(splits, split)
    labels, names, out_size, kind, note = _decide(splits, task, n_classes)
    inputs = {s: _inputs(getattr(splits, s)) for s in labels}
    read_as = numpy.float32 if normalize in input_scaling.STANDARDIZING else numpy.dtype(str(dtype))
    for split, arrays in inputs.items():
        for array in arrays:
            input_checks.numbers(array.dtype, array.shape[1:], splits.source(split))
            input_checks.finite(array, splits.source(split), read_as)
    train = ArrayDataset(*inputs["train"], labels["train"])
    if "val" in labels:
        val = ArrayDataset(*inputs["val"], labels["val"])
    elif hold_out:
        train, val = _hold_out(train, labels["train"], kind, val_fraction, rng)
    else:
        val = SubDataset(train, numpy.arange(0))
    test = ArrayDataset(*inputs["test"], labels["test"]) if "test" in labels else None
    values = input_scaling.fit(normalize, train, splits.source("train"))
    wrap = input_scaling.applied(values)
    shape = tuple(int(d) for d in inputs["train"][0].shape[1:])
    data = Data(wrap(train), wrap(val), shape, out_size, kind, wrap(test), names, note, values,
                splits.files, raw_inputs.describe(inputs["train"][0]))
    data.note = describe(data, splits.source("train"))
    data.note += "".join(f"\nnote: {line}" for line in splits.notes)
    return data


def declared_classes(factory, options: dict) -> int | None:
    """The number of classes a dataset callable was asked for: its ``n_classes`` argument as
    given in ``options``, else that argument's default; None when it has no such argument
    (the labels then tell)."""
    if "n_classes" in options:
        return options["n_classes"]
    parameter = inspect.signature(factory).parameters.get("n_classes")
    return None if parameter is None or parameter.default is parameter.empty else parameter.default


def describe(data: Data, source: str) -> str:
    """The line that says what a run trains on, and how its task was chosen."""
    counts = f"{len(data.train)} training, {len(data.val)} validation"
    counts += f", {len(data.test)} test" if data.test is not None else ""
    return f"{source}: {counts} examples of shape {data.in_shape}; {data.note}"


def as_splits(result, origin: str) -> Splits | None:
    """``result`` as :class:`Splits`, or None for a ``(train, val)`` pair of datasets.
    Anything else (Python lists in place of arrays, a dataset whose examples are not tuples)
    is refused in one line naming ``origin`` and what it returned."""
    if isinstance(result, Splits):
        if not result.origin:
            result.origin = {"train": origin}
        return result
    if isinstance(result, tuple) and result and all(_is_array(a) for a in result):
        return Splits(result, origin={"train": origin})
    if isinstance(result, ArrayDataset):
        return Splits(result.arrays, origin={"train": origin})
    if isinstance(result, tuple) and len(result) == 2 and all(_has_examples(d) for d in result):
        return None
    if _has_examples(result):
        return Splits(_stacked(result), origin={"train": origin})
    raise ConfigError(f"{origin} returned {_returned(result)}; {EXPECTED}")


EXPECTED = ("a dataset callable returns arrays (x, y) with one row per example (convert Python "
            "lists with numpy.asarray), one dataset (len and [i] giving a tuple of arrays, the "
            "label last), a (train, val) pair of datasets, a trainer_run.data.Splits or a "
            "trainer_run.data.Data")
"""What a loader may return, for the line that refuses anything else."""


def _returned(value) -> str:
    """What a loader returned, for a message: ``dict``, ``an array of shape (40,) alone``,
    ``a tuple of (list of 40, ndarray of shape (40,))``, ``a list whose examples are float``."""
    if _is_array(value):
        return f"an array of shape {tuple(value.shape)} alone"
    arrays = isinstance(value, list) and 0 < len(value) <= 4 and all(map(_is_array, value))
    if isinstance(value, tuple) or arrays:
        items = f"{', '.join(_item(v) for v in value[:4])}{', ...' * (len(value) > 4)}"
        return f"a {type(value).__name__} of ({items}){', not a tuple' * arrays}"
    if _is_dataset(value) and len(value) > 0:
        return f"a {type(value).__name__} whose examples are {type(value[0]).__name__}, not tuples"
    return f"an empty {type(value).__name__}" if _is_dataset(value) else type(value).__name__


def _item(value) -> str:
    if _is_array(value):
        return f"{type(value).__name__} of shape {tuple(value.shape)}"
    if _is_dataset(value):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__


def _is_array(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and len(value.shape) > 0


def _is_dataset(value) -> bool:
    return (hasattr(value, "__len__") and hasattr(value, "__getitem__") and not _is_array(value)
            and not isinstance(value, (dict, str, bytes)))


def _has_examples(value) -> bool:
    """Whether ``value`` is a dataset whose first example is a tuple (of arrays, the label last)."""
    return _is_dataset(value) and len(value) > 0 and isinstance(value[0], tuple)


def _stacked(dataset) -> tuple:
    """The examples of a dataset as stacked arrays (read once, at start)."""
    check(len(dataset) > 0 and isinstance(dataset[0], tuple),
          "a dataset's examples must be tuples of arrays, the label last")
    return take(dataset, numpy.arange(len(dataset)))


def _check_rows(splits: Splits, split: str) -> None:
    arrays = getattr(splits, split)
    if arrays is None:
        return
    other = next((type(a).__name__ for a in arrays if not _is_array(a)), None)
    if other is not None:
        raise ConfigError(f"{splits.source(split)}: the {split} split holds a {other} where an "
                          "array belongs; every part of a split is an array with one row per "
                          "example (convert Python lists with numpy.asarray)")
    lengths = [len(a) for a in arrays]
    check(len(arrays) >= 2, f"{splits.source(split)}: a split needs inputs and labels, got "
          f"{len(arrays)} array")
    check(len(set(lengths)) == 1, f"{splits.source(split)}: the inputs have {lengths[0]} examples "
          f"and the labels {lengths[-1]}; every array needs one row per example")
    check(lengths[0] > 0, f"{splits.source(split)} holds no examples")


def _inputs(arrays: tuple) -> tuple:
    """The input arrays of a split, each through :func:`with_channel_axis`."""
    return tuple(with_channel_axis(a) for a in arrays[:-1])


def with_channel_axis(a):
    """``a`` with a channel axis when it is a batch of single-channel images ``(N, H, W)``:
    ``(N, 1, H, W)``; any other array as it is."""
    return a.reshape(a.shape[0], 1, *a.shape[1:]) if a.ndim == 3 else a


def _decide(splits: Splits, task: str, n_classes: int | None):
    """Labels by split (in memory, as the task needs them), the class names (None: ids), the
    output size, the task and the line that says how it was chosen (and a hint line)."""
    raw = {s: numpy.asarray(getattr(splits, s)[-1]) for s in ("train", "val", "test")
           if getattr(splits, s) is not None}
    kind, reason = _task(raw["train"], task)
    if kind == "regression":
        labels = {s: _targets(y, splits.source(s)) for s, y in raw.items()}
        out_size = labels["train"].shape[1]
        note = f"regression with {out_size} target(s) ({reason})"
        hint = whole_number_hint(raw["train"]) if task == "auto" else None
        return labels, None, out_size, kind, note + (f"\nhint: {hint}" if hint else "")
    labels, names = _class_ids(raw, splits, task)
    _check_seen(labels, names, splits)
    out_size = int(max(int(y.max()) for y in labels.values())) + 1
    names = names if names is not None else splits.classes
    gaps = gap_hint(labels["train"], out_size) if names is None and n_classes is None else None
    if names is not None:
        n_classes = n_classes or len(names)
    if n_classes is not None:
        for split, y in labels.items():
            check(y.max() < n_classes, f"{splits.source(split)}: label {int(y.max())} is out of "
                  f"range for {n_classes} classes (ids 0 to {n_classes - 1}); fix the labels or the "
                  "class count")
        out_size = n_classes
    note = f"classification into {out_size} classes ({reason})"
    return labels, names, out_size, kind, note + (f"\nhint: {gaps}" if gaps else "")


def gap_hint(ids, out_size: int) -> str | None:
    """The hint for class ids that skip values (fewer distinct ids than ``out_size``, the
    largest + 1), else None."""
    distinct = len(numpy.unique(ids))
    if distinct >= out_size:
        return None
    return (f"the labels run 0..{out_size - 1} with {distinct} distinct values, so the model "
            f"gets {out_size} outputs; renumber the classes 0..{distinct - 1} if the gaps are "
            "not classes")


def _check_seen(labels: dict, names, splits: Splits) -> None:
    """Refuses a class of the validation or test split that no training example has, naming
    the file, the class and how many examples have it."""
    seen = numpy.unique(labels["train"])
    for split in ("val", "test"):
        y = labels.get(split)
        if y is None:
            continue
        unseen = y[~numpy.isin(y, seen)]
        if unseen.size:
            c = int(unseen[0])
            value = names[c] if names is not None else c
            count = int((y == c).sum())
            raise ConfigError(f"{splits.source(split)}: class {[value]} is not among the training "
                              f"labels ({count} example{'s' * (count != 1)} there have it); every "
                              f"class needs training examples: move some to "
                              f"{splits.source('train')} or drop them")


def _task(y, task: str) -> tuple[str, str]:
    """The task and why: the setting, or under ``auto`` the labels' type."""
    if task != "auto":
        return task, f"dataset.task={task}"
    if y.dtype.kind in "biuUSO":
        what = "names" if y.dtype.kind in "USO" else "integers"
        return "classification", f"auto: the labels are {what}; set dataset.task to change"
    check(y.dtype.kind == "f", f"labels of type {y.dtype} are neither classes nor numbers")
    return "regression", "auto: the labels are floats; set dataset.task to change"


def whole_number_hint(y) -> str | None:
    """The hint for float labels that are all whole numbers under ``task=auto``, else None."""
    y = numpy.asarray(y)
    if y.dtype.kind == "f" and y.size and numpy.all(numpy.isfinite(y)) and numpy.all(y == numpy.round(y)):
        return ("the labels are whole numbers stored as floats; if they are classes, set "
                "dataset.task=classification")
    return None


def _targets(y, source: str):
    check(y.dtype.kind in "biuf", f"{source}: dataset.task=regression needs numeric targets and "
          f"the labels are {y.dtype}; choose dataset.task=classification")
    y = y.astype(numpy.float32)
    check(bool(numpy.all(numpy.isfinite(y))), f"{source}: the targets hold NaN or infinity; fill "
          "or drop those examples before training")
    return y.reshape(len(y), -1)


def _class_ids(raw: dict, splits: Splits, task: str):
    """Class ids by split (int32) and the class names (None for numeric labels)."""
    if raw["train"].dtype.kind in "USO":
        names = sorted(set(raw["train"].astype(str).tolist()))
        for y in raw.values():  # unseen names after the training ones: _check_seen refuses them
            names += sorted(set(y.astype(str).tolist()) - set(names))
        index = {name: i for i, name in enumerate(names)}
        ids = {split: numpy.array([index[v] for v in y.astype(str).tolist()], numpy.int32)
               for split, y in raw.items()}
        return ids, names
    ids = {}
    for split, y in raw.items():
        source = splits.source(split)
        y = y.reshape(len(y), -1)
        check(y.shape[1] == 1, f"{source}: classification needs one class id per example and the "
              f"labels have shape {y.shape}; choose dataset.task=regression for several targets")
        y = y[:, 0]
        if y.dtype.kind == "f":
            fraction = numpy.flatnonzero(~numpy.isfinite(y) | (y != numpy.round(y)))
            check(fraction.size == 0, f"{source}: dataset.task={task} needs whole-number class "
                  f"ids and label {y[fraction[:1]].tolist()} (example {fraction[:1].tolist()}) "
                  "is not one; choose dataset.task=regression")
        negative = numpy.flatnonzero(y < 0)
        check(negative.size == 0, f"{source}: label {y[negative[:1]].tolist()} (example "
              f"{negative[:1].tolist()}) is negative; class ids run from 0 to the number of "
              "classes - 1")
        big = numpy.flatnonzero(y >= MAX_CLASSES)
        check(big.size == 0, f"{source}: label {y[big[:1]].tolist()} (example {big[:1].tolist()}) "
              f"is beyond the {MAX_CLASSES:,} classes a run takes (ids 0 to {MAX_CLASSES - 1:,}); "
              "renumber the classes from 0, or choose dataset.task=regression for numbers")
        ids[split] = y.astype(numpy.int32)
    return ids, None


def _hold_out(train: ArrayDataset, y, kind: str, fraction: float, rng):
    """``train`` split into training and ``fraction`` held out for validation."""
    n = len(train)
    n_val = max(1, int(round(n * fraction)))
    check(n_val < n, f"dataset.val_fraction={fraction} leaves no training examples of {n}")
    if kind == "classification":
        val, rest = stratified_positions(y, n_val, rng)
    else:
        order = rng.permutation(n)
        val, rest = numpy.sort(order[:n_val]), numpy.sort(order[n_val:])
    return SubDataset(train, rest), SubDataset(train, val)


def _pair(result: tuple, task: str, n_classes: int | None, origin: str) -> Data:
    """A ``(train, val)`` pair of datasets as they are; the task from the first label, the
    inputs' kind and shape from the first example."""
    train, val = result
    x, t = train[0][0], train[0][-1]
    shape = tuple(numpy.shape(x))
    input_checks.numbers(numpy.asarray(x).dtype, shape, origin)
    kind, reason = _task(numpy.asarray(t), task)
    if kind == "classification":
        classes = n_classes or max(int(numpy.asarray(train[i][-1])) for i in range(len(train))) + 1
        return Data(train, val, shape, classes, kind, note=f"classification into {classes} "
                    f"classes ({reason})")
    size = int(numpy.size(t))
    return Data(train, val, shape, size, kind, note=f"regression with {size} target(s) ({reason})")
