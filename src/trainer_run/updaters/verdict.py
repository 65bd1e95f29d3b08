"""The verdict on an update's gradients, once they are complete (accumulated, summed over
replicas and processes): apply them, and with which factor; skip the update; compute them
again on new batches; or stop the run (:class:`~trainer_run.errors.Diverged`).

- Without a dynamic loss scaler the :class:`~.divergence.NanPolicy` judges the loss, then,
  with clipping by global norm, the gradients' global norm (a finite loss may come with
  infinite gradients).
- With a :class:`~trainer_run.loss_scaling.DynamicLossScaler` the scaler judges whether the
  gradients are finite; with clipping by global norm, whether their norm is (one pass over
  the gradients instead of two; a norm whose sum of squares overflows counts as an overflow,
  and backs the scale off too).
- Applied gradients carry the loss scale; with clipping by global norm they also carry the
  inverse of the clipping factor (:class:`~.clipping.GlobalNormClip`), which the optimizer's
  step divides out with it, so the optimizer sees ``factor * gradient / scale`` before its
  ``rescale_grad``.
"""

from __future__ import annotations

import math

from .clipping import GlobalNormClip
from .divergence import NanPolicy

GLOBAL_NORM = "gradients' global norm"


class Verdict:
    """Judges an update's gradients by ``nan`` (a :class:`~.divergence.NanPolicy`),
    ``loss_scaler`` (a :class:`~trainer_run.loss_scaling.LossScaler`, None: none) and ``clip``
    (a :class:`~.clipping.GlobalNormClip`, None: no clipping by global norm); see the
    module docstring."""

    def __init__(self, nan: NanPolicy, loss_scaler=None, clip: GlobalNormClip | None = None):
        self.nan = nan
        self.loss_scaler = loss_scaler
        self.clip = clip

    def __call__(self, store, loss, scale: float, iteration: int) -> tuple[str, float]:
        """``"apply"``, ``"skip"`` or ``"retry"`` for the gradients in ``store`` (a
        :class:`~trainer_run.params.ParamStore`, carrying the loss scale ``scale``) of the
        update at ``iteration`` whose loss is ``loss`` (a scalar, read only without a dynamic
        loss scaler), and the factor the gradients carry for the optimizer's step."""
        grads = [group.grad for group in store.groups]
        norm = self.clip.norm(grads, scale) if self.clip is not None else None
        if self.loss_scaler is not None and self.loss_scaler.dynamic:
            finite = store.grads_finite() if norm is None else math.isfinite(norm)
            verdict = self.loss_scaler.record(finite)
        else:
            verdict = self.nan.verdict(float(loss), iteration)
            if verdict == "apply" and norm is not None:
                verdict = self.nan.verdict(norm, iteration, GLOBAL_NORM)
        if verdict != "apply" or norm is None:
            return verdict, scale
        return verdict, scale / self.clip.factor(norm)
