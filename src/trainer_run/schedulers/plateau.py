"""Reduce on plateau: the rate follows a monitored metric (PyTorch's ``ReduceLROnPlateau``)."""

from __future__ import annotations

import logging
from math import inf

from ..errors import check, check_number
from .base import LRScheduler, register

logger = logging.getLogger(__name__)


@register
class ReduceOnPlateauScheduler(LRScheduler):
    """Lowers the rate when a monitored metric stops improving (PyTorch's ``ReduceLROnPlateau``;
    not in MXNet 1.9).

    Two calls drive it:

    - ``scheduler(num_update)`` returns the current rate: the warmup rate while
      ``num_update < warmup_steps``, ``base_lr`` afterwards. It changes nothing.
    - ``scheduler.step(value)`` is given each new value of the metric named ``monitor``
      (``val/loss`` by default; :class:`~trainer_run.training.extensions.PlateauStep` does
      this after each evaluation) and may lower ``base_lr``.

    ``step(value)`` follows PyTorch exactly (one call is one PyTorch "epoch"):

    1. ``value`` is *better* than ``best`` when, for ``mode="min"``, ``value < best * (1 -
       threshold)`` (``threshold_mode="rel"``) or ``value < best - threshold`` (``"abs"``);
       for ``mode="max"``, ``value > best * (1 + threshold)`` or ``value > best +
       threshold``. Before the first value ``best`` is the worst possible (+inf for min,
       -inf for max; stored as ``None``), so any finite first value is better. A better
       value becomes ``best`` and resets ``num_bad_epochs`` to 0; any other value (NaN
       included) adds 1 to ``num_bad_epochs``. As in PyTorch, the relative threshold is
       taken of ``best`` itself, so for a negative metric in min mode ``best * (1 -
       threshold)`` lies above ``best``.
    2. While in cooldown (``cooldown_counter > 0``) the counter goes down by 1 and
       ``num_bad_epochs`` is reset to 0: bad values during cooldown do not count.
    3. When ``num_bad_epochs > patience`` the rate becomes ``max(base_lr * factor,
       min_lr)`` (left unchanged if that lowers it by ``eps`` or less),
       ``cooldown_counter`` becomes ``cooldown`` and ``num_bad_epochs`` 0.

    So with ``patience=2`` the rate drops on the third value in a row that is not better
    than the best, and after a drop the next ``cooldown`` values are ignored for counting.

    Warmup: the ramp rises to the ``base_lr`` given at construction, as in every scheduler
    here. Values given to ``step`` during the warmup count as usual; a reduction lowers
    ``base_lr``, which is used once the warmup is over.

    ``base_lr`` is the starting rate (an optimizer built with an explicit ``learning_rate``
    writes it there, as in MXNet); from then on it is the current rate. ``reductions`` (how
    many times it was lowered; loading it lowers the ``base_lr`` it was built with as many
    times), ``best``, ``num_bad_epochs``, ``cooldown_counter`` and ``last_epoch`` (the number of
    values seen) are in ``state_dict``.

    Args:
        monitor: name of the metric in the trainer's observation, e.g. ``val/loss``.
        mode: ``"min"`` (lower is better) or ``"max"``.
        factor: multiplier of each reduction, ``0 <= factor < 1``.
        patience: number of values without improvement tolerated before a reduction.
        threshold: least change that counts as an improvement (see ``threshold_mode``).
        threshold_mode: ``"rel"`` or ``"abs"``.
        cooldown: number of values after a reduction during which no value counts as bad.
        min_lr: the rate never goes below this.
        eps: a reduction smaller than this is skipped.
        base_lr, warmup_steps, warmup_begin_lr, warmup_mode: see :class:`LRScheduler`.
    """

    _state_fields = ("reductions", "best", "num_bad_epochs", "cooldown_counter", "last_epoch")

    def __init__(self, monitor="val/loss", mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8, base_lr=0.01,
                 warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        check(isinstance(monitor, str) and monitor != "",
              f"monitor must be the name of a metric such as 'val/loss', got {monitor!r}")
        self.monitor = monitor
        check(mode in ("min", "max"), f"mode must be 'min' or 'max', got {mode!r}")
        self.mode = mode
        self.factor = check_number("factor", factor, low=0)
        check(self.factor < 1.0, f"factor must be < 1 to reduce the rate, got {factor!r}")
        self.patience = check_number("patience", patience, low=0, integer=True)
        self.threshold = check_number("threshold", threshold, low=0)
        check(threshold_mode in ("rel", "abs"),
              f"threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.threshold_mode = threshold_mode
        self.cooldown = check_number("cooldown", cooldown, low=0, integer=True)
        self.min_lr = check_number("min_lr", min_lr, low=0)
        self.eps = check_number("eps", eps, low=0)
        self.best = None
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self.reductions = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self.base_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, value: float) -> bool:
        """Whether ``value`` improves on ``best`` (see the class docstring)."""
        if self.best is None:
            best = inf if self.mode == "min" else -inf
        else:
            best = self.best
        if self.mode == "min" and self.threshold_mode == "rel":
            return value < best * (1.0 - self.threshold)
        if self.mode == "min":
            return value < best - self.threshold
        if self.threshold_mode == "rel":
            return value > best * (self.threshold + 1.0)
        return value > best + self.threshold

    def zero_rate(self) -> tuple[str, str] | None:
        if self.factor == 0 and self.min_lr == 0:
            return "min_lr", f"factor={self.factor!r} brings it down to min_lr={self.min_lr!r}"
        return super().zero_rate()

    def _reduced(self, lr: float) -> float:
        return max(lr * self.factor, self.min_lr)

    def _restore(self) -> None:
        for _ in range(self.reductions):
            self.base_lr = self._reduced(self.base_lr)

    def step(self, value) -> None:
        """Takes the next value of the monitored metric; may lower ``base_lr``."""
        current = float(value)
        self.last_epoch += 1
        if self.is_better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            old = self.base_lr
            new = self._reduced(old)
            if old - new > self.eps:
                self.base_lr = new
                self.reductions += 1
                logger.info("%s=%s did not improve for %d values: learning rate %0.5e -> %0.5e",
                            self.monitor, current, self.patience + 1, old, new)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
