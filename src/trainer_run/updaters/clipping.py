"""Gradient clipping by global norm: MXNet 1.9's ``gluon.utils.clip_global_norm`` and
Lightning's ``gradient_clip_algorithm="norm"`` (``updater.clip_global_norm``).

The norm is that of every gradient of the model taken as one vector, the square root of the
sum of each flat gradient buffer's squared L2 norm, and the factor is MXNet's:
``min(max_norm / (norm + 1e-8), 1)`` (Lightning's has ``1e-6``). The updater takes it after
the gradients are complete: accumulated over ``accum_grad`` batches, summed over replicas
and processes by the kvstore, and with the loss scale divided out; so every process of a
``dist_sync`` run, every replica count and every accumulation of the same global batch sees
the same norm. Our gradients are those of the mean loss over the global batch (each batch's
backward is weighted by its share, :mod:`.weighting`), so ``max_norm`` bounds the norm of the
gradient of the loss being minimised, as in Lightning.

The factor multiplies the gradient before ``rescale_grad`` and the optimizer's own
element-wise ``clip_gradient`` (MXNet's recipe calls ``clip_global_norm`` on the summed
gradients after ``allreduce_grads`` and before ``update``, which applies ``rescale_grad``
then ``clip_gradient``): where the verdict is read at once the updater folds it into the
step's gradient factor, so no gradient is rewritten and no extra pass is made over memory
besides the norm's; where it stays on the device (:mod:`.device_verdict`) the factor
multiplies the gradients in place, as MXNet's ``clip_global_norm`` does.
"""

from __future__ import annotations

import math

import numpy

from ..backend import array_module
from ..errors import ConfigError, check_number

EPSILON = 1e-8
"""MXNet's: ``scale = max_norm / (total_norm + 1e-8)``."""


class GlobalNormClip:
    """Clips gradients to a global L2 norm of at most ``max_norm`` (> 0)."""

    def __init__(self, max_norm):
        self.max_norm = check_number("clip_global_norm", max_norm, low=0, low_open=True)
        if not math.isfinite(self.max_norm):
            raise ConfigError(f"clip_global_norm must be a finite number, got {max_norm!r}; "
                              "null clips nothing")

    def norm(self, grads, scale: float = 1.0):
        """The L2 norm of the flat gradient buffers ``grads`` together, divided by ``scale``
        (the factor they carry: a loss scale), as a 0-d float64 array on their device. Each
        buffer's squares are summed on its device in its own precision, float16 in float32,
        and the sums added in float64; inf or NaN when a gradient is, or when a sum
        overflows."""
        total = None
        for grad in grads:
            flat = grad if grad.dtype.itemsize >= 4 else grad.astype(numpy.float32)
            with numpy.errstate(over="ignore", invalid="ignore"):
                square = array_module(flat).dot(flat, flat).astype(numpy.float64)
            total = square if total is None else total + square
        xp = array_module(total)
        return xp.sqrt(total) / scale

    def factor(self, norm):
        """The factor of gradients whose global norm is ``norm`` (a finite one):
        ``min(max_norm / (norm + 1e-8), 1)``, a float for a Python float and an array (or
        NumPy scalar) of the norm's module otherwise."""
        if type(norm) is float:
            return min(self.max_norm / (norm + EPSILON), 1.0)
        return array_module(norm).minimum(self.max_norm / (norm + EPSILON), 1.0)


def global_norm_clip(max_norm, asynchronous: bool = False) -> GlobalNormClip | None:
    """The clipping of ``clip_global_norm=max_norm`` (None: none). Refused with a
    ``dist_async`` kvstore (``asynchronous``): its server applies each worker's push key by
    key as it arrives, so no global norm of an update's gradients exists there."""
    if max_norm is None:
        return None
    if asynchronous:
        raise ConfigError("clip_global_norm needs every gradient of an update at once, and a "
                          "dist_async server applies each worker's push key by key as it "
                          "arrives; choose kvstore=dist_sync or updater.clip_global_norm=null")
    return GlobalNormClip(max_norm)

