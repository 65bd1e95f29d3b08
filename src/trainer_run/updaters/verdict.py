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

from .. import host_reads
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

    def connect(self, optimizer) -> None:
        """Joins the updater whose main optimizer is ``optimizer``; here nothing to join. The
        updater calls it once, when it is made."""

    def readings(self) -> dict:
        """The values shown beside the metrics: the loss scaler's (the loss scale, and skipped
        steps under dynamic scaling), or ``nan_policy=skip``'s skipped steps."""
        status = self.loss_scaler.readings() if self.loss_scaler is not None else {}
        if self.nan.policy == "skip" and not getattr(self.loss_scaler, "dynamic", False):
            status["skipped_steps"] = self.nan.skipped_steps
        return status

    def backward_scale(self):
        """The loss scale backward is seeded with (1.0: none): the scaler's."""
        return self.loss_scaler.scale if self.loss_scaler is not None else 1.0

    def settle(self) -> None:
        """Reads what the verdicts left on the device (here: nothing, they are read at once)."""

    def reset(self) -> None:
        """Forgets what was kept between updates (after a state is loaded)."""

    def __call__(self, store, loss, scale: float, iteration: int) -> tuple[str, float, None]:
        """``"apply"``, ``"skip"`` or ``"retry"`` for the gradients in ``store`` (a
        :class:`~trainer_run.params.ParamStore`, carrying the loss scale ``scale``) of the
        update at ``iteration`` whose loss is ``loss`` (a scalar, read only without a dynamic
        loss scaler), the factor the gradients carry for the optimizer's step, and where the
        step applies (None: everywhere; see :mod:`.device_verdict`)."""
        grads = [group.grad for group in store.groups]
        norm = None if self.clip is None else host_reads.scalar(self.clip.norm(grads, scale))
        if self.loss_scaler is not None and self.loss_scaler.dynamic:
            finite = host_reads.scalar(store.grads_finite()) if norm is None else math.isfinite(norm)
            verdict = self.loss_scaler.record(bool(finite))
        else:
            verdict = self.nan.verdict(host_reads.scalar(loss), iteration)
            if verdict == "apply" and norm is not None:
                verdict = self.nan.verdict(norm, iteration, GLOBAL_NORM)
        if verdict != "apply" or norm is None:
            return verdict, scale, None
        return verdict, scale / self.clip.factor(norm), None
