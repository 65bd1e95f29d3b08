"""Learning-rate schedules with MXNet 1.9's class names, arguments and values.

A scheduler is called with ``num_update``, the optimizer's count of updates (1 at the
first update), and returns the learning rate. As in MXNet, the optimizer overwrites the
scheduler's ``base_lr`` with its own ``learning_rate`` when attached; schedules that keep
a private copy of their starting rate (``CosineScheduler.base_lr_orig`` and the warmup
target ``warmup_final_lr``) take it at construction, exactly as MXNet does, so pass the
same ``base_lr`` to both (the command line does this for you).

``FactorScheduler`` and ``MultiFactorScheduler`` change their ``base_lr`` as they are
called (MXNet's stateful schedules); ``ReduceOnPlateauScheduler`` (not in MXNet) is also
given each new value of a monitored metric through ``step(value)``.

Every scheduler exposes its progress through ``state_dict`` / ``load_state_dict`` so that a
checkpoint restores the schedule exactly. The state holds progress only (how many
reductions a stateful schedule has made, the last update a decay computed, a plateau's
metric history), never a parameter: ``base_lr``, ``factor``, ``step``, ``final_lr`` and the
rest come from the constructor (and the optimizer's ``learning_rate``). A state loaded into
a scheduler built with other parameters therefore continues the schedule those parameters
define, from the same progress: a resumed run with a new learning rate uses it at once.
Load a state into a newly built scheduler.
"""

from __future__ import annotations

import logging
import numbers
from math import cos, inf, pi

from . import registry
from .errors import check, check_number

logger = logging.getLogger(__name__)

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

    As in MXNet, an optimizer writes its ``learning_rate`` into ``base_lr`` when attached,
    so ``base_lr`` is the starting rate; from then on it is the current rate. ``reductions``
    (how many times it was lowered; loading it lowers the ``base_lr`` it was built with as many
    times),
    ``best``, ``num_bad_epochs``, ``cooldown_counter`` and ``last_epoch`` (the number of
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
