"""The verdict on an update's gradients, decided on the device: no read inside an iteration.

A :class:`~.verdict.Verdict` reads the loss (or the gradients' finiteness) at every update;
on a GPU each read stops the CPU until the device has caught up. A backend with
``deferred`` (CuPy's default, :class:`~trainer_run.backend.Backend`) uses
:class:`DeviceVerdict` instead: the same rules, decided by arrays on the device.

- **The step is masked.** Every update runs the optimizer's step, and where the verdict is
  "do not apply" the weights and optimizer states are put back as they were
  (:meth:`~trainer_run.optimizers.IndexApplier.unless`), so an update whose loss, global norm
  or gradients are not finite changes nothing, as before.
- **``nan_policy=stop``**: the first non-finite update stops the run at the next read (a log
  row, an evaluation, a checkpoint, the end of training, or :data:`PENDING` updates without
  one), with the error naming the update's iteration; from that update on every step is
  masked, so the parameters are those before it.
- **``nan_policy=skip`` and dynamic loss scaling**: the decision (and nnabla's scale: backed
  off on overflow, grown after ``interval`` clean steps) is taken on the device; the host
  learns it one update later, when the next update's gradients are queued and the device has
  long finished the step, to keep its counts: a skipped update's optimizer update count,
  learning-rate schedule and counters are rolled back, the skipped steps counted, and the
  loss scale's host copy (the one in the logs and checkpoints, and the step's gradient
  factor) follows the device's. These reads do not hold the GPU: its queue still holds the
  next update's work. ``on_overflow=retry`` draws new batches, a decision of the host, so it
  reads at once (:class:`~.verdict.Verdict`).
- **Clipping by global norm**: the norm and MXNet's factor are device values, and the factor
  multiplies the gradients in place (as MXNet's ``clip_global_norm`` does) instead of being
  folded into the step's gradient factor.
"""

from __future__ import annotations

from .. import host_reads
from ..backend import array_module
from .verdict import GLOBAL_NORM, Verdict

PENDING = 1000
"""Under ``nan_policy=stop``, the verdicts kept on the device are read after this many updates
without a read (a log row every 10,000 iterations, say), so that they hold little memory."""


class DeviceVerdict(Verdict):
    """:class:`~.verdict.Verdict`'s rules, decided on the device. See the module docstring."""

    def __init__(self, nan, loss_scaler=None, clip=None):
        super().__init__(nan, loss_scaler, clip)
        self.optimizer = None
        self._dynamic = loss_scaler is not None and loss_scaler.dynamic
        self._each_update = self._dynamic or nan.policy == "skip"
        self.reset()

    def connect(self, optimizer) -> None:
        """The main optimizer, ``optimizer``, whose counters a skipped update rolls back."""
        self.optimizer = optimizer

    def reset(self) -> None:
        # (iteration, device values, or a Later carrying them) not yet read
        self._pending: list[tuple[int, list | host_reads.Later]] = []
        self._counters = None  # the optimizer's counters before the pending step
        self._healthy = None  # nan_policy=stop: false from the first non-finite update on
        self._scale = self._clean = None  # the dynamic scale and clean steps, on the device

    def backward_scale(self):
        """The loss scale of the next backward: the device's under dynamic loss scaling."""
        if not self._dynamic:
            return super().backward_scale()
        return self._scale if self._scale is not None else self.loss_scaler.scale

    def __call__(self, store, loss, scale, iteration: int):
        """``("apply", factor, applied)``: ``applied`` (a 0-d boolean array on the device)
        says whether the step is kept; ``factor`` is the loss scale the gradients carry."""
        if self._each_update or len(self._pending) >= PENDING:
            self.settle()
        grads = [group.grad for group in store.groups]
        xp = array_module(grads[0])
        scale = self.loss_scaler.scale if self._dynamic else scale
        norm = self.clip.norm(grads, scale) if self.clip is not None else None
        if self._dynamic:
            applied = store.grads_finite() if norm is None else xp.isfinite(norm)
            self._pending.append((iteration, host_reads.Later([applied])))
            self._scale_after(applied, xp)
        else:
            values = [xp.asarray(loss)] + ([] if norm is None else [norm])
            self._pending.append((iteration, host_reads.Later(values) if self._each_update
                                  else values))
            applied = xp.isfinite(values[0])
            applied = applied if norm is None else applied & xp.isfinite(norm)
            if self.nan.policy == "stop":
                applied = applied if self._healthy is None else applied & self._healthy
                self._healthy = applied
        if norm is not None:
            factor = self.clip.factor(norm)
            for grad in grads:
                grad *= factor.astype(grad.dtype)
        if self._each_update and self.optimizer is not None:
            self._counters = self.optimizer.state_dict()
        return "apply", scale, applied

    def _scale_after(self, finite, xp) -> None:
        """nnabla's rule (:class:`~trainer_run.loss_scaling.DynamicLossScaler`) on the device's
        scale after an update whose gradients are ``finite`` or not."""
        scaler = self.loss_scaler
        if self._scale is None:
            self._scale = xp.asarray(scaler.scale, dtype="float64")
            self._clean = xp.asarray(scaler.clean_steps, dtype="int64")
        clean = xp.where(finite, self._clean + 1, 0)
        grow = clean >= scaler.grows_at
        grown = xp.where(grow, self._scale * scaler.scaling_factor, self._scale)
        self._scale = xp.where(finite, grown, self._scale / scaler.scaling_factor)
        self._clean = xp.where(grow, scaler.after_growth, clean)

    def settle(self) -> None:
        """Reads the pending verdicts (one read) and applies the host's side of each, in
        order: the skip counts, the loss scaler's record, the optimizer's counters rolled
        back for a skipped step; ``nan_policy=stop`` raises
        :class:`~trainer_run.errors.Diverged` for the first non-finite update."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        kept = [v for _, values in pending if isinstance(values, list) for v in values]
        read = iter(host_reads.scalars(kept))
        for iteration, values in pending:
            got = values.result() if isinstance(values, host_reads.Later) else [
                next(read) for _ in values]
            if self._dynamic:
                verdict = self.loss_scaler.record(bool(got[0]))
            else:
                verdict = self.nan.verdict(got[0], iteration)
                if verdict == "apply" and len(got) > 1:
                    verdict = self.nan.verdict(got[1], iteration, GLOBAL_NORM)
            if verdict == "skip" and self._counters is not None:
                self.optimizer.load_state_dict(self._counters)
        self._counters = None


def verdict_for(nan, loss_scaler, clip, backend, asynchronous: bool) -> Verdict:
    """The verdict of the updates: decided on the device with a ``deferred`` backend, except
    where the host decides at once (a ``dist_async`` server applies the step; ``retry`` draws
    new batches)."""
    retries = getattr(loss_scaler, "on_overflow", None) == "retry"
    if backend is None or not backend.deferred or asynchronous or retries:
        return Verdict(nan, loss_scaler, clip)
    return DeviceVerdict(nan, loss_scaler, clip)
