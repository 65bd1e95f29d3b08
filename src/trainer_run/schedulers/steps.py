"""MXNet's stateful step schedules: ``base_lr`` times ``factor`` after given updates."""

from __future__ import annotations

import logging
import numbers

from ..errors import check, check_number
from .base import LRScheduler, register

logger = logging.getLogger(__name__)


@register
class FactorScheduler(LRScheduler):
    """MXNet 1.9 ``FactorScheduler``: ``base_lr`` times ``factor`` once every ``step`` updates.

    After the warmup, each call first catches up with ``num_update``: while ``num_update >
    count + step`` it adds ``step`` to ``count`` and multiplies ``base_lr`` by ``factor``,
    setting it to ``stop_factor_lr`` whenever it falls below that. So the rate at update
    ``n`` is ``base_lr * factor ** ((n - 1) // step)`` (floored), and the first reduction
    is seen at update ``step + 1``. ``count`` starts at 0, not at ``warmup_steps``, exactly
    as in MXNet.

    The schedule is stateful: ``base_lr`` and ``count`` change as it is called, never go
    back (calling with a smaller ``num_update`` returns the current rate), and a jump ahead
    applies every reduction in between (the loop MXNet keeps for continuing a training).
    ``count`` is its state; loading it re-applies ``count // step`` reductions to the
    ``base_lr`` it was built with.

    Args:
        step: updates between two reductions (>= 1).
        factor: multiplier of each reduction (<= 1; 1 keeps the rate constant).
        stop_factor_lr: the rate never goes below this once a reduction reaches it.
        base_lr, warmup_steps, warmup_begin_lr, warmup_mode: see :class:`LRScheduler`.
    """

    _state_fields = ("count",)

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.step = check_number("step", step, low=1, integer=True)
        self.factor = check_number("factor", factor, low=0, high=1.0)
        self.stop_factor_lr = check_number("stop_factor_lr", stop_factor_lr, low=0)
        self.count = 0

    def zero_rate(self) -> tuple[str, str] | None:
        if self.factor == 0 and self.stop_factor_lr == 0:
            return "stop_factor_lr", (f"factor={self.factor!r} brings it down to "
                                      f"stop_factor_lr={self.stop_factor_lr!r}")
        return super().zero_rate()

    def _reduced(self, lr: float) -> float:
        lr *= self.factor
        return self.stop_factor_lr if lr < self.stop_factor_lr else lr

    def _restore(self) -> None:
        for _ in range(self.count // self.step):
            lr = self._reduced(self.base_lr)
            if lr == self.base_lr:
                break
            self.base_lr = lr

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        # a while rather than an if, for continuing a training (MXNet's note)
        while num_update > self.count + self.step:
            lr = self._reduced(self.base_lr)
            floored = lr == self.stop_factor_lr
            if lr == self.base_lr and isinstance(num_update, numbers.Integral):
                # a fixed point (factor 1, or the floor reached): the remaining turns of
                # the loop would only advance count; do them at once
                self.count += (num_update - self.count - 1) // self.step * self.step
                break
            self.count += self.step
            self.base_lr = lr
            if floored:
                logger.info("Update[%d]: now learning rate arrived at %0.5e, will not change in "
                            "the future", num_update, lr)
            else:
                logger.info("Update[%d]: Change learning rate to %0.5e", num_update, lr)
        return self.base_lr


@register
class MultiFactorScheduler(LRScheduler):
    """MXNet 1.9 ``MultiFactorScheduler``: ``base_lr`` times ``factor`` after each update
    listed in ``step``.

    The rate at update ``n`` (after the warmup) is ``base_lr * factor ** k`` where ``k`` is
    the number of entries of ``step`` strictly below ``n``: with ``step=[10, 20]`` the first
    reduction is seen at update 11. Like :class:`FactorScheduler` it is stateful
    (``base_lr``, ``cur_step_ind`` and ``count`` change as it is called, never go back, and
    a jump ahead applies every reduction in between); ``cur_step_ind`` and ``count`` are its
    state, and loading them re-applies ``cur_step_ind`` reductions to the ``base_lr`` it was
    built with.

    Args:
        step: strictly increasing list of updates (each >= 1) after which the rate drops.
        factor: multiplier of each reduction (<= 1).
        base_lr, warmup_steps, warmup_begin_lr, warmup_mode: see :class:`LRScheduler`.
    """

    _state_fields = ("count", "cur_step_ind")

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        check(isinstance(step, (list, tuple)) and len(step) >= 1,
              f"step must be a non-empty list of updates, got {step!r}")
        steps = []
        for i, value in enumerate(step):
            value = check_number(f"step[{i}]", value, low=1, integer=True)
            check(i == 0 or value > steps[-1],
                  f"step must be an increasing list of updates, got {list(step)!r}")
            steps.append(value)
        self.step = steps
        self.factor = check_number("factor", factor, low=0, high=1.0)
        self.cur_step_ind = 0
        self.count = 0

    def zero_rate(self) -> tuple[str, str] | None:
        if self.factor == 0:
            return "factor", f"every reduction multiplies it by factor={self.factor!r}"
        return super().zero_rate()

    def _restore(self) -> None:
        for _ in range(self.cur_step_ind):
            self.base_lr *= self.factor

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        # a while rather than an if, for continuing a training (MXNet's note)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
            logger.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr
