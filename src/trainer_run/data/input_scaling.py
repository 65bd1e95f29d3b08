"""Input scaling: the normalization of the inputs ``x`` (an example's first array), ``dataset.normalize``:

- ``none``: the arrays as stored (the converter casts float inputs to the compute dtype).
- ``unit``: unsigned integers (uint8 pixels) to float32 in [0, 1], divided by the type's
  largest value (255 for uint8).
- ``standardize``: float32 ``(x - mean) / std`` with the mean and the (population) standard
  deviation of every feature over the training split only; a feature that never varies has
  std 1.
- ``per_channel``: the same with one mean and standard deviation per channel (the first axis
  of an example, ``C`` of ``(C, H, W)`` images: over every pixel of that channel of every
  training image), as torchvision's ``Normalize`` is used; it is recorded as ``standardize``
  with values of shape ``(C, 1, ..., 1)``.

The values are fitted once (:func:`fit`), applied to every split batch by batch as examples
are read (:class:`Normalized`), and kept with the run (``Data.normalization``) so evaluation
and prediction use the same ones.
"""

from __future__ import annotations

import numpy

from ..backend import array_module
from ..errors import check
from .datasets import take

KINDS = ("none", "unit", "standardize", "per_channel")
STANDARDIZING = ("standardize", "per_channel")
"""The kinds that compute in float32 from the training split's moments."""
CHUNK_BYTES = 1 << 26


def fit(kind: str, train, source: str) -> dict:
    """The normalization values of ``kind`` for the dataset ``train`` (``{}`` for none)."""
    check(kind in KINDS, f"dataset.normalize={kind!r} is unknown; choose one of {', '.join(KINDS)}")
    if kind == "none":
        return {}
    first = take(train, numpy.arange(1))[0]
    if kind == "unit":
        check(first.dtype.kind == "u", f"{source}: dataset.normalize=unit maps unsigned integers "
              f"(uint8 pixels) to [0, 1] and the inputs are {first.dtype}; choose "
              "dataset.normalize=standardize or none")
        return {"kind": "unit", "scale": numpy.float32(numpy.iinfo(first.dtype).max)}
    mean, std = _moments(train, max(1, CHUNK_BYTES // max(first.nbytes, 1)))
    if kind == "per_channel":
        check(mean.ndim >= 2, f"{source}: dataset.normalize=per_channel needs examples with a "
              f"channel axis, (C, H, W) images, and these have shape {mean.shape}; choose "
              "dataset.normalize=standardize")
        mean, std = _per_channel(mean, std)
    std[std == 0] = 1.0
    return {"kind": "standardize", "mean": mean.astype(numpy.float32),
            "std": std.astype(numpy.float32)}


def _per_channel(mean, std):
    """The moments of each channel (first axis) from those of its features, each feature
    counting the same examples: the mean of the means, and the variance from the mean of
    ``std ** 2 + mean ** 2``."""
    axes = tuple(range(1, mean.ndim))
    channel_mean = mean.mean(axis=axes, keepdims=True)
    second = (std * std + mean * mean).mean(axis=axes, keepdims=True)
    return channel_mean, numpy.sqrt(numpy.maximum(second - channel_mean * channel_mean, 0.0))


def _moments(dataset, step: int):
    """Per-feature mean and population std of the inputs, chunk by chunk (Chan's merge)."""
    n, mean, m2 = 0, None, None
    for start in range(0, len(dataset), step):
        x = take(dataset, numpy.arange(start, min(start + step, len(dataset))))[0]
        x = numpy.asarray(x, dtype=numpy.float64)
        k, chunk_mean = len(x), x.mean(axis=0)
        chunk_m2 = ((x - chunk_mean) ** 2).sum(axis=0)
        if mean is None:
            n, mean, m2 = k, chunk_mean, chunk_m2
            continue
        delta = chunk_mean - mean
        total = n + k
        mean = mean + delta * (k / total)
        m2 = m2 + chunk_m2 + delta * delta * (n * k / total)
        n = total
    return mean, numpy.sqrt(m2 / n)


def transform(values: dict, x):
    """``x`` (a NumPy or CuPy array) normalized with ``values`` (as :func:`fit` returned them,
    or with the arrays moved to ``x``'s device)."""
    kind = values.get("kind")
    if kind == "unit":
        return array_module(x).divide(x, values["scale"], dtype=numpy.float32)
    if kind == "standardize":
        return (x.astype(numpy.float32) - values["mean"]) / values["std"]
    return x


class Normalized:
    """``dataset`` whose examples' first array is normalized with ``values``."""

    wraps = True
    """Its ``take`` is ``dataset``'s (:func:`trainer_run.data.worker_processes.reads_rows`)."""

    def __init__(self, dataset, values: dict):
        self.dataset = dataset
        self.values = values

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        x, *rest = self.dataset[index]
        return (transform(self.values, x), *rest)

    def take(self, indices):
        """Rows ``indices``, the inputs normalized."""
        x, *rest = take(self.dataset, indices)
        return (transform(self.values, x), *rest)


def applied(values: dict):
    """A function from a dataset to the same normalized with ``values`` (None stays None)."""
    def wrap(dataset):
        if dataset is None or not values:
            return dataset
        return Normalized(dataset, values)
    return wrap
