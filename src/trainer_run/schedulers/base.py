"""The scheduler base class (warmup, progress state), the constant schedule and the registry."""

from __future__ import annotations

from .. import registry
from ..errors import check, check_number

REGISTRY: dict[str, type] = {}
"""Scheduler classes by lower-case class name."""


def register(klass: type) -> type:
    """Registers a scheduler class under its lower-case class name (a class decorator)."""
    return registry.register(REGISTRY, "scheduler", klass)


def create(name: str, **kwargs) -> "LRScheduler":
    """Instantiates the scheduler registered as ``name`` (case-insensitive) with ``kwargs``."""
    return registry.create(REGISTRY, "scheduler", name, **kwargs)


class LRScheduler:
    """Base class: a warmup phase, then the subclass's schedule.

    Args:
        base_lr: the learning rate after warmup.
        warmup_steps: number of updates in the warmup phase.
        warmup_begin_lr: learning rate at update 0 of the warmup.
        warmup_mode: ``"linear"`` (rise from ``warmup_begin_lr`` to ``base_lr``) or
            ``"constant"`` (stay at ``warmup_begin_lr``).
    """

    _state_fields: tuple = ()

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        self.base_lr = check_number("base_lr", base_lr, low=0)
        self.warmup_steps = check_number("warmup_steps", warmup_steps, low=0, integer=True)
        self.warmup_final_lr = self.base_lr
        self.warmup_begin_lr = check_number("warmup_begin_lr", warmup_begin_lr, low=0)
        check(
            self.warmup_begin_lr <= self.warmup_final_lr,
            f"warmup_begin_lr ({warmup_begin_lr}) must not exceed base_lr ({base_lr})",
        )
        check(
            warmup_mode in ("linear", "constant"),
            f"warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}",
        )
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        if self.warmup_mode == "linear":
            increase = (self.warmup_final_lr - self.warmup_begin_lr) * float(num_update) / float(
                self.warmup_steps
            )
            return self.warmup_begin_lr + increase
        return self.warmup_begin_lr

    def __call__(self, num_update: int) -> float:
        raise NotImplementedError(f"{type(self).__name__} must define __call__")

    def zero_rate(self) -> tuple[str, str] | None:
        """What brings the rate to 0 at some update (``base_lr > 0`` given): the argument to
        raise above 0 and how it does it, e.g. ``("warmup_begin_lr", "a constant warmup stays
        at warmup_begin_lr=0")``; None when the rate stays above 0. Subclasses add the causes
        of their own schedule."""
        if self.warmup_mode == "constant" and self.warmup_steps and self.warmup_begin_lr == 0:
            return "warmup_begin_lr", ("a constant warmup stays at "
                                       f"warmup_begin_lr={self.warmup_begin_lr!r}")
        return None

    def state_dict(self) -> dict:
        return {name: getattr(self, name) for name in self._state_fields}

    def load_state_dict(self, state: dict) -> None:
        for name in self._state_fields:
            setattr(self, name, state[name])
        self._restore()

    def _restore(self) -> None:
        """Re-derives what the loaded progress implies under this scheduler's parameters."""


@register
class ConstantScheduler(LRScheduler):
    """``base_lr`` at every update after the warmup (not in MXNet 1.9; added for completeness)."""

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self.base_lr
