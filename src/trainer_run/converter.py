"""The converter: a list of examples becomes arrays on the backend's device.

``concat_examples(batch, backend)`` follows Chainer: examples that are tuples give a tuple
of stacked arrays, dicts give a dict, bare arrays give one array. It is the one place
where training data crosses from host to device. Floating arrays are cast to the backend's
compute dtype (``backend.dtype``: float16 under mixed precision); integer arrays (class
ids) keep theirs.
"""

from __future__ import annotations

import numpy


def batch_of(dataset, indices, backend=None):
    """The examples ``indices`` of ``dataset`` as one batch on ``backend`` (None: host
    arrays): the dataset's ``take`` (one indexed read per array) when it has one, else its
    examples stacked by :func:`concat_examples`."""
    if hasattr(dataset, "take"):
        return to_device(dataset.take(numpy.asarray(indices)), backend)
    return concat_examples([dataset[int(i)] for i in indices], backend)


def concat_examples(batch, backend=None):
    """Stacks a list of examples along a new first axis and moves them to ``backend``."""
    if len(batch) == 0:
        raise ValueError("batch is empty")
    first = batch[0]
    if isinstance(first, tuple):
        arrays = tuple(numpy.stack([ex[k] for ex in batch]) for k in range(len(first)))
        return tuple(_to_device(a, backend) for a in arrays)
    if isinstance(first, dict):
        return {key: _to_device(numpy.stack([ex[key] for ex in batch]), backend) for key in first}
    return _to_device(numpy.stack(batch), backend)


def to_device(arrays, backend=None):
    """Moves an already stacked batch (tuple, dict or array) to ``backend``."""
    if isinstance(arrays, tuple):
        return tuple(_to_device(a, backend) for a in arrays)
    if isinstance(arrays, dict):
        return {k: _to_device(a, backend) for k, a in arrays.items()}
    return _to_device(arrays, backend)


def _to_device(array, backend):
    if backend is None:
        return numpy.asarray(array)
    kind = (array if hasattr(array, "dtype") else numpy.asarray(array)).dtype.kind
    return backend.asarray(array, dtype=backend.dtype if kind == "f" else None)
