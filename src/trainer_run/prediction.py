"""A trained model's outputs for raw inputs (:func:`predict`, behind
:meth:`trainer_run.runner.trained.Trained.predict`), batch by batch.

- **Shapes.** ``x`` is a batch of examples of the run's shape ``in_shape`` (``(N, *in_shape)``),
  or one example (``in_shape``), whose outputs then come back without the batch axis. Images
  of one channel (``in_shape`` ``(1, H, W)``) may leave the channel axis out: ``(N, H, W)`` is a
  batch, ``(H, W)`` one image. An array of shape ``in_shape`` is always one example, also where
  it could be read as a batch of one image without its channel axis (``(1, H, W)``), as
  PyTorch's layers read an input without a batch axis: its outputs have no batch axis.
- **Batches.** The examples go through the model ``batch_size`` at a time, each normalized as
  the run normalized its batches (:func:`trainer_run.data.input_scaling.transform`) and, as the
  run's converter does, floating inputs cast to the run's dtype; so the memory used beyond the
  inputs and the outputs is one batch's (an input array may be memory-mapped).
- **Raw inputs.** ``x`` holds numbers (booleans, integers or floats); strings, objects,
  complex numbers are a TypeError naming what they are. Integers given to a run that read
  floats are cast to its dtype as floats are, so they give the same outputs. Each batch is
  checked against the run's recorded raw inputs (:mod:`trainer_run.data.raw_inputs`): inputs
  that cannot be raw inputs of this run (``x / 255`` for a run on uint8 pixels, which the
  run's own scaling would scale twice) give one :class:`UserWarning` per call, saying what
  ``x`` holds and what the run read.
- **Mode.** The model runs in evaluation mode (no dropout, batch norm's running statistics;
  its mode is restored after) and records no graph (:func:`trainer_run.autograd.no_grad`),
  as the run's evaluation does (:class:`~trainer_run.training.extensions.evaluator.Evaluator`).

Results do not depend on the batch size beyond float rounding: a batch's outputs are computed
row by row, but BLAS chooses its kernel by the matrices' shapes (a matrix-vector product for a
batch of one), which may add the same products in another order.
"""

from __future__ import annotations

import warnings

import numpy

from . import host_reads
from .autograd import as_data, no_grad
from .data import input_scaling, raw_inputs
from .module import evaluating


def predict(model, x, in_shape: tuple, values: dict, dtype, batch_size: int,
            raw: dict | None = None) -> numpy.ndarray:
    """The outputs of ``model.forward`` for the raw inputs ``x`` (see the module docstring):
    ``values`` are the run's normalization values, ``dtype`` its float dtype, ``raw`` its
    raw inputs' record (:func:`trainer_run.data.raw_inputs.recorded`; None or ``{}``: not
    checked). Raises TypeError for a model without ``forward(x)`` or an ``x`` that does not
    hold numbers, ValueError for ``x`` of another shape than the run's examples or a
    ``batch_size`` that is not a positive integer; warns (UserWarning, once) when ``x``
    cannot be raw inputs of the run."""
    forward = getattr(model, "forward", None)
    if not callable(forward):
        raise TypeError(f"{type(model).__name__} has no forward(x); predict needs one: a "
                        "method that returns the outputs (logits for a classifier) of a batch x")
    batch_size = _checked(batch_size)
    x = numpy.asarray(x)
    if x.dtype.kind not in raw_inputs.NUMERIC:
        raise TypeError(f"predict takes numbers (raw inputs as the run read them) and x holds "
                        f"{raw_inputs.kind_of(x)} ({x.dtype}); convert it to an array of numbers")
    batch, single = as_batch(x, tuple(in_shape))
    feed = _Feed(values, numpy.dtype(dtype), raw or {})
    with no_grad(), evaluating(model):
        outputs = _batched(forward, batch, feed, batch_size)
    if feed.doubt is not None:
        warnings.warn(f"{feed.doubt}: these cannot be raw inputs of this run. predict takes raw "
                      "inputs, as the run read them, and applies the run's normalization itself, "
                      "so inputs scaled already (x / 255) are scaled twice; give the raw values",
                      UserWarning, stacklevel=3)
    return outputs[0] if single else outputs


def as_batch(x: numpy.ndarray, in_shape: tuple) -> tuple[numpy.ndarray, bool]:
    """``x`` as a batch ``(N, *in_shape)`` (a view, no copy) and whether it was one example."""
    images = len(in_shape) == 3 and in_shape[0] == 1
    if x.shape == in_shape:
        return x[None], True
    if images and x.shape == in_shape[1:]:
        return x[None, None], True
    if x.shape[1:] == in_shape:
        return x, False
    if images and x.ndim == 3 and x.shape[1:] == in_shape[1:]:
        return x[:, None], False
    alone = f" (or {in_shape[1:]} and (N, {', '.join(map(str, in_shape[1:]))}) without the " \
            "channel axis)" if images else ""
    raise ValueError(f"predict takes one example of shape {in_shape} or a batch (N, "
                     f"{', '.join(map(str, in_shape))}){alone}, as the run's examples; x has "
                     f"shape {x.shape}")


def _checked(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, numpy.integer)) \
            or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


class _Feed:
    """Batches of raw inputs as the run's converter gave the model its batches: normalized
    with ``values``, floats cast to ``dtype`` (integers too when the run's raw inputs, ``raw``,
    were floats). ``doubt`` keeps why the first doubtful batch cannot be raw inputs of the
    run (:func:`trainer_run.data.raw_inputs.implausible`); later batches are not checked."""

    def __init__(self, values: dict, dtype: numpy.dtype, raw: dict):
        self.values, self.dtype, self.raw = values, dtype, raw
        self.doubt = None
        self.checking = True

    def __call__(self, batch: numpy.ndarray) -> numpy.ndarray:
        if self.doubt is None and self.checking:
            self.doubt = raw_inputs.implausible(batch, self.raw)
        if batch.dtype.kind in "biu" and raw_inputs.are_floats(self.raw):
            batch = batch.astype(self.dtype)
        x = input_scaling.transform(self.values, batch)
        return x.astype(self.dtype, copy=False) if x.dtype.kind == "f" else numpy.asarray(x)


def _batched(forward, batch: numpy.ndarray, feed: _Feed, batch_size: int) -> numpy.ndarray:
    """``forward`` on ``batch`` ``batch_size`` examples at a time, the outputs in one array.
    A batch of no examples gives no outputs, shaped by those of one example of zeros."""
    if len(batch) == 0:  # the zeros below are ours, not the user's: nothing to check
        feed.checking = False
        return _forward(forward, numpy.zeros_like(batch, shape=(1, *batch.shape[1:])), feed)[:0]
    outputs = None
    for start in range(0, len(batch), batch_size):
        y = _forward(forward, batch[start:start + batch_size], feed)
        if outputs is None:
            outputs = numpy.empty((len(batch), *y.shape[1:]), y.dtype)
        outputs[start:start + len(y)] = y
    return outputs


def _forward(forward, raw: numpy.ndarray, feed: _Feed) -> numpy.ndarray:
    """The outputs of ``forward`` for a batch of raw inputs, checked to have one row each."""
    return host_reads.array(batch_outputs(forward, feed(raw)))


def batch_outputs(forward, x):
    """``forward(x)``'s outputs for a batch ``x`` given to the model as it is (no scaling, no
    cast), as an array of the array module they came in (nothing is read to the host): the
    one call of a model's ``forward`` that :func:`predict` and the evaluation's metrics
    (:mod:`trainer_run.metrics`) share. Outputs without one row per example of ``x`` are a
    ValueError naming ``forward``."""
    y = as_data(forward(x))
    if y.ndim == 0 or len(y) != len(x):
        raise ValueError(f"{forward.__qualname__} returned an array of shape {y.shape} for a "
                         f"batch of {len(x)} examples; it must return one row per example")
    return y
