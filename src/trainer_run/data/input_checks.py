"""The checks every input array of a run passes when its data is loaded (see
:mod:`trainer_run.data.prepare`, rule 4): :func:`numbers` (the inputs are numbers and an example
holds at least one) and :func:`finite` (no NaN or infinity, also none that the cast to the
dtype the run reads them in would make). Each refusal is one
:class:`~trainer_run.errors.ConfigError` line naming where the inputs came from.
"""

from __future__ import annotations

import numpy

from ..errors import ConfigError, check

CHUNK_BYTES = 1 << 26
"""The bytes of inputs checked at a time (a memory-mapped array is read chunk by chunk)."""

NUMBERS = "biuf"
"""The kinds of input arrays a run trains on: booleans, integers and floats."""


def numbers(dtype, shape: tuple, source: str) -> None:
    """Refuses inputs that are not numbers (strings, Python objects, complex numbers, dates)
    or examples of ``shape`` that hold no value (a zero in the shape), naming ``source``."""
    dtype = numpy.dtype(dtype)
    if dtype.kind not in NUMBERS:
        what, fix = KINDS.get(dtype.kind, ("not numbers", "convert them to integers or floats"))
        raise ConfigError(f"{source}: the inputs are {what} ({dtype}) and a model trains on "
                          f"numbers; {fix}")
    check(0 not in shape, f"{source}: each example's inputs have shape {tuple(shape)}, which "
          "holds no values; give at least one feature")


KINDS = {
    "U": ("strings", "encode the text or categories as numbers (integers or floats)"),
    "S": ("bytes", "encode the text or categories as numbers (integers or floats)"),
    "O": ("Python objects", "save arrays of integers or floats"),
    "c": ("complex numbers", "give the real and imaginary parts as two float features"),
    "M": ("dates", "convert them to numbers (e.g. seconds since a start)"),
    "m": ("time spans", "convert them to numbers (e.g. seconds)"),
}
"""What each kind of array that is no numbers is called, and how to make numbers of it."""


def finite(array, source: str, read_as=numpy.float32) -> None:
    """Refuses NaN or infinity in a float input, and a finite value that the cast to
    ``read_as`` (the dtype the run reads it in) makes infinite, naming the first example."""
    if array.dtype.kind != "f":
        return
    narrower = numpy.finfo(read_as).max < numpy.finfo(array.dtype).max
    for start, chunk in chunks(array):
        bad = ~numpy.isfinite(chunk)
        if bad.any():
            raise ConfigError(f"{source}: the inputs hold NaN or infinity (first at example "
                              f"{start + _first(bad)}); fill or drop those values before training")
        if not narrower:
            continue
        with numpy.errstate(over="ignore"):
            over = ~numpy.isfinite(chunk.astype(read_as))
        if over.any():
            name = numpy.dtype(read_as).name
            raise ConfigError(f"{source}: the inputs hold values beyond the range of {name}, "
                              f"which the run reads them in (largest "
                              f"{float(numpy.finfo(read_as).max):.4g}; first at example "
                              f"{start + _first(over)}); they would become infinity: scale "
                              f"them down{_wider(read_as)}")


def chunks(array):
    """``(start, examples)`` for consecutive runs of examples of ``array`` of about
    :data:`CHUNK_BYTES` each, read into memory one at a time (a memory-mapped array too)."""
    step = max(1, CHUNK_BYTES // max(array[:1].nbytes, 1))
    for start in range(0, len(array), step):
        yield start, numpy.asarray(array[start:start + step])


def _first(bad) -> int:
    """The first example (row) of ``bad`` that holds a True."""
    return int(numpy.flatnonzero(bad.reshape(len(bad), -1).any(axis=1))[0])


def _wider(read_as) -> str:
    return (" or choose precision=fp32 or dataset.normalize=standardize"
            if numpy.dtype(read_as) == numpy.float16 else "")
