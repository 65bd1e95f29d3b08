"""Learning-rate schedules with MXNet 1.9's class names, arguments and values.

A scheduler is called with ``num_update``, the optimizer's count of updates (1 at the
first update), and returns the learning rate. As in MXNet, the optimizer overwrites the
scheduler's ``base_lr`` with its own ``learning_rate`` when attached; schedules that keep
a private copy of their starting rate (``CosineScheduler.base_lr_orig`` and the warmup
target ``warmup_final_lr``) take it at construction, exactly as MXNet does, so pass the
same ``base_lr`` to both (the command line does this for you).

Every scheduler exposes its mutable fields through ``state_dict`` / ``load_state_dict`` so
that a checkpoint restores the schedule exactly.
"""

from __future__ import annotations

from math import cos, pi

from .errors import ConfigError, check, check_number

REGISTRY: dict[str, type] = {}


def register(klass: type) -> type:
    """Registers a scheduler class under its lower-case class name."""
    REGISTRY[klass.__name__.lower()] = klass
    return klass


def create(name: str, **kwargs) -> "LRScheduler":
    """Instantiates the scheduler registered as ``name`` (case-insensitive)."""
    klass = REGISTRY.get(name.lower())
    if klass is None:
        raise ConfigError(f"unknown scheduler {name!r}; choose one of {', '.join(sorted(REGISTRY))}")
    return klass(**kwargs)


class LRScheduler:
    """Base class: a warmup phase, then the subclass's schedule.

    Args:
        base_lr: the learning rate after warmup.
        warmup_steps: number of updates in the warmup phase.
        warmup_begin_lr: learning rate at update 0 of the warmup.
        warmup_mode: ``"linear"`` (rise from ``warmup_begin_lr`` to ``base_lr``) or
            ``"constant"`` (stay at ``warmup_begin_lr``).
    """

    _state_fields: tuple = ("base_lr",)

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

    def state_dict(self) -> dict:
        return {name: getattr(self, name) for name in self._state_fields}

    def load_state_dict(self, state: dict) -> None:
        for name in self._state_fields:
            setattr(self, name, state[name])


@register
class ConstantScheduler(LRScheduler):
    """``base_lr`` at every update after the warmup (not in MXNet 1.9; added for completeness)."""

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self.base_lr


@register
class CosineScheduler(LRScheduler):
    """Cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates.

    ``final_lr + (base_lr_orig - final_lr) * (1 + cos(pi * (n - warmup_steps) / (max_update
    - warmup_steps))) / 2`` for ``warmup_steps <= n <= max_update``; after ``max_update`` it
    keeps the last value it computed (MXNet 1.9's behaviour).
    """

    _state_fields = ("base_lr",)

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.max_update = check_number("max_update", max_update, low=1, integer=True)
        self.final_lr = check_number("final_lr", final_lr, low=0)
        check(
            self.max_update > self.warmup_steps,
            f"max_update ({max_update}) must exceed warmup_steps ({warmup_steps})",
        )
        self.base_lr_orig = self.base_lr
        self.max_steps = self.max_update - self.warmup_steps

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * (
                1 + cos(pi * (num_update - self.warmup_steps) / self.max_steps)
            ) / 2
        return self.base_lr
