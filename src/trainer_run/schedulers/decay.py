"""Schedules that decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates: cosine, poly."""

from __future__ import annotations

from math import cos, pi

from ..errors import check, check_number
from .base import LRScheduler, register


class DecayScheduler(LRScheduler):
    """Base of the schedules that decay from ``base_lr`` to ``final_lr`` over ``max_update``
    updates after the warmup (cosine, poly): the rate at update ``n`` is :meth:`decayed`
    ``(n)`` for ``warmup_steps <= n <= max_update``; after ``max_update`` it keeps the last
    value it computed (MXNet 1.9's behaviour). ``base_lr_orig`` is the ``base_lr`` given at
    construction; ``state_dict`` holds the update last computed (``last_update``)."""

    _state_fields = ("last_update",)

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = check_number("max_update", max_update, low=1, integer=True)
        check(
            self.max_update > self.warmup_steps,
            f"max_update ({max_update}) must exceed warmup_steps ({warmup_steps})",
        )
        self.final_lr = check_number("final_lr", final_lr, low=0)
        self.base_lr_orig = self.base_lr
        self.max_steps = self.max_update - self.warmup_steps
        self.last_update = None

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            self.last_update = num_update
            self.base_lr = self.decayed(num_update)
        return self.base_lr

    def decayed(self, num_update: int) -> float:
        """The rate at ``num_update`` (``warmup_steps <= num_update <= max_update``)."""
        raise NotImplementedError(f"{type(self).__name__} must define decayed")

    def zero_rate(self) -> tuple[str, str] | None:
        if self.final_lr == 0:
            return "final_lr", f"the schedule ends at final_lr={self.final_lr!r}"
        return super().zero_rate()

    def _restore(self) -> None:
        if self.last_update is not None:
            self.base_lr = self.decayed(self.last_update)


@register
class CosineScheduler(DecayScheduler):
    """Cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates.

    ``final_lr + (base_lr_orig - final_lr) * (1 + cos(pi * (n - warmup_steps) / (max_update
    - warmup_steps))) / 2`` for ``warmup_steps <= n <= max_update``; after ``max_update`` it
    keeps the last value it computed (MXNet 1.9's behaviour).
    """

    def decayed(self, num_update: int) -> float:
        return self.final_lr + (self.base_lr_orig - self.final_lr) * (
            1 + cos(pi * (num_update - self.warmup_steps) / self.max_steps)
        ) / 2


@register
class PolyScheduler(DecayScheduler):
    """MXNet 1.9 ``PolyScheduler``: polynomial decay from ``base_lr`` to ``final_lr``.

    ``final_lr + (base_lr_orig - final_lr) * (1 - (n - warmup_steps) / (max_update -
    warmup_steps)) ** pwr`` for ``warmup_steps <= n <= max_update``; after ``max_update``
    it keeps the last value it computed, as MXNet does (see :class:`DecayScheduler`).

    Args:
        max_update: the update at which the rate reaches ``final_lr`` (> ``warmup_steps``).
        pwr: power of the decay (>= 0; 1 is linear, 2 MXNet's default).
        final_lr: the rate at ``max_update``.
        base_lr, warmup_steps, warmup_begin_lr, warmup_mode: see :class:`LRScheduler`.
    """

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        self.power = check_number("pwr", pwr, low=0)
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr,
                         warmup_mode)

    def decayed(self, num_update: int) -> float:
        return self.final_lr + (self.base_lr_orig - self.final_lr) * pow(
            1 - float(num_update - self.warmup_steps) / float(self.max_steps), self.power
        )
