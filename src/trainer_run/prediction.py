"""A trained model's outputs for raw inputs (:func:`predict`, behind
:meth:`trainer_run.trained.Trained.predict`), batch by batch.

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
- **Mode.** The model runs in evaluation mode (no dropout, batch norm's running statistics;
  its mode is restored after) and records no graph (:func:`trainer_run.autograd.no_grad`),
  as the run's evaluation does (:class:`~trainer_run.training.extensions.evaluator.Evaluator`).

Results do not depend on the batch size beyond float rounding: a batch's outputs are computed
row by row, but BLAS chooses its kernel by the matrices' shapes (a matrix-vector product for a
batch of one), which may add the same products in another order.
"""

from __future__ import annotations

import numpy

from .autograd import as_data, no_grad
from .data import input_scaling
from .module import evaluating


def predict(model, x, in_shape: tuple, values: dict, dtype, batch_size: int) -> numpy.ndarray:
    """The outputs of ``model.forward`` for the raw inputs ``x`` (see the module docstring):
    ``values`` are the run's normalization values, ``dtype`` its float dtype. Raises TypeError
    for a model without ``forward(x)``, ValueError for ``x`` of another shape than the run's
    examples or a ``batch_size`` that is not a positive integer."""
    forward = getattr(model, "forward", None)
    if not callable(forward):
        raise TypeError(f"{type(model).__name__} has no forward(x); predict needs one: a "
                        "method that returns the outputs (logits for a classifier) of a batch x")
    batch_size = _checked(batch_size)
    batch, single = as_batch(numpy.asarray(x), tuple(in_shape))
    with no_grad(), evaluating(model):
        outputs = _batched(forward, batch, values, numpy.dtype(dtype), batch_size)
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


def _batched(forward, batch: numpy.ndarray, values: dict, dtype: numpy.dtype,
             batch_size: int) -> numpy.ndarray:
    """``forward`` on ``batch`` ``batch_size`` examples at a time, the outputs in one array.
    A batch of no examples gives no outputs, shaped by those of one example of zeros."""
    if len(batch) == 0:
        return _forward(forward, numpy.zeros_like(batch, shape=(1, *batch.shape[1:])),
                        values, dtype)[:0]
    outputs = None
    for start in range(0, len(batch), batch_size):
        y = _forward(forward, batch[start:start + batch_size], values, dtype)
        if outputs is None:
            outputs = numpy.empty((len(batch), *y.shape[1:]), y.dtype)
        outputs[start:start + len(y)] = y
    return outputs


def _forward(forward, raw: numpy.ndarray, values: dict, dtype: numpy.dtype) -> numpy.ndarray:
    """The outputs of ``forward`` for a batch of raw inputs, checked to have one row each."""
    y = numpy.asarray(as_data(forward(_inputs(raw, values, dtype))))
    if y.ndim == 0 or len(y) != len(raw):
        raise ValueError(f"{forward.__qualname__} returned an array of shape {y.shape} for a "
                         f"batch of {len(raw)} examples; it must return one row per example")
    return y


def _inputs(raw: numpy.ndarray, values: dict, dtype: numpy.dtype) -> numpy.ndarray:
    """A batch of raw inputs as the run's converter gave the model its batches."""
    x = input_scaling.transform(values, raw)
    return x.astype(dtype, copy=False) if x.dtype.kind == "f" else numpy.asarray(x)
