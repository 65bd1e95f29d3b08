"""Triggers: tiny callables ``trigger(trainer) -> bool`` deciding when something happens.

:class:`IntervalTrigger` fires every ``period`` iterations, or each time ``epoch_detail``
crosses a multiple of ``period`` epochs (Chainer's rule). :class:`StopTrigger` ends
training once ``max_iterations`` updates or ``max_epochs`` epochs are done, whichever
comes first. Both are stateless, so resuming needs nothing of them. :func:`interval` reads a
config's interval: ``200`` (iterations), ``1epoch``, ``0.5epoch``.

A trigger that can say where it fires has ``first_firing(iteration)``: the first iteration
at or after ``iteration`` at which it can fire while no stop is requested (``math.inf``:
never), or None when that depends on more than the iteration (an epoch interval). An
:class:`Asked` trigger is asked only from that iteration on, and at any iteration where a
stop is requested (:data:`STOP_REQUESTED` fires then): a trigger that is off costs nothing
in between. A trigger without the method (a user's callable) is asked every iteration.
"""

from __future__ import annotations

import math
import re

from ..errors import ConfigError, check_number

UNITS = ("iteration", "epoch")
WRITTEN = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*"
                     r"(epoch|epochs|iteration|iterations)?\s*")


class IntervalTrigger:
    def __init__(self, period, unit: str = "iteration"):
        if unit not in UNITS:
            raise ConfigError(f"trigger unit must be 'iteration' or 'epoch', got {unit!r}")
        self.period = check_number("trigger period", period, low=0, low_open=True,
                                   integer=(unit == "iteration"))
        self.unit = unit

    def first_firing(self, iteration: int) -> int | None:
        """The first multiple of ``period`` from ``iteration`` on; None for epochs."""
        return -(-iteration // self.period) * self.period if self.unit == "iteration" else None

    def __call__(self, trainer) -> bool:
        updater = trainer.updater
        if self.unit == "iteration":
            return updater.iteration % self.period == 0
        previous = updater.previous_epoch_detail or 0.0
        return math.floor(previous / self.period) != math.floor(updater.epoch_detail / self.period)

    def __repr__(self):
        return f"IntervalTrigger({self.period}, {self.unit!r})"


def interval(key: str, value) -> IntervalTrigger:
    """The trigger of the config's interval ``key`` = ``value``: a whole number of iterations
    (``200``, ``200iterations``, ``2e3``), or of epochs with a unit (``1epoch``, ``0.5epoch``,
    ``1e-3epoch``), fired by
    Chainer's rule for fractional epochs (:class:`IntervalTrigger`). Anything else is a
    ConfigError naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{key} must be an integer number of iterations (200) or a number of "
                          f"epochs (1epoch, 0.5epoch, 1e-3epoch), got {value!r}")
    if isinstance(value, int):
        return IntervalTrigger(check_number(key, value, low=1, integer=True))
    written = WRITTEN.fullmatch(value)
    if written is None:
        raise ConfigError(f"{key}={value} is neither an integer number of iterations (200) nor a "
                          "number of epochs (1epoch, 0.5epoch, 1e-3epoch)")
    number, unit = float(written.group(1)), (written.group(2) or "iteration").rstrip("s")
    if unit == "iteration":
        if not number.is_integer() or number < 1:
            raise ConfigError(f"{key}={value}: a number of iterations is a whole number >= 1")
        return IntervalTrigger(int(number))
    if not 0 < number < math.inf:
        raise ConfigError(f"{key}={value}: a number of epochs must be > 0 and finite")
    return IntervalTrigger(number, "epoch")


class StopTrigger:
    """True once ``max_iterations`` or ``max_epochs`` is reached (None: no limit)."""

    def __init__(self, max_iterations=None, max_epochs=None):
        if max_iterations is None and max_epochs is None:
            raise ConfigError("max_iterations or max_epochs must be set, or training never stops")
        if max_iterations is not None:
            max_iterations = check_number("max_iterations", max_iterations, low=1, integer=True)
        if max_epochs is not None:
            max_epochs = check_number("max_epochs", max_epochs, low=0, low_open=True)
        self.max_iterations = max_iterations
        self.max_epochs = max_epochs

    def __call__(self, trainer) -> bool:
        updater = trainer.updater
        if self.max_iterations is not None and updater.iteration >= self.max_iterations:
            return True
        return self.max_epochs is not None and updater.epoch_detail >= self.max_epochs

    def first_firing(self, iteration: int) -> int | None:
        """``max_iterations`` (or ``iteration`` past it); None with ``max_epochs``."""
        return None if self.max_epochs is not None else max(iteration, self.max_iterations)

    def reason(self, trainer) -> str:
        """Which limit ended the run: ``max_iterations`` or ``max_epochs``."""
        reached = self.max_iterations is not None and trainer.updater.iteration >= self.max_iterations
        return "max_iterations" if reached else "max_epochs"

    def deciding(self, iterations_per_epoch: float) -> str | None:
        """With both limits, one line saying which ends the run, where, and how to have the
        other decide; None with one limit."""
        if self.max_iterations is None or self.max_epochs is None:
            return None
        by_epochs = math.ceil(self.max_epochs * iterations_per_epoch)
        iterations = f"trainer.max_iterations={self.max_iterations}"
        epochs = f"trainer.max_epochs={self.max_epochs:g}"
        if self.max_iterations <= by_epochs:
            return (f"{iterations} ends this run at epoch {self.max_iterations / iterations_per_epoch:.2f}, "
                    f"before {epochs} (iteration {by_epochs}); trainer.max_iterations=null trains "
                    f"{self.max_epochs:g} epochs")
        return (f"{epochs} ends this run at iteration {by_epochs}, before {iterations}; "
                "trainer.max_epochs=null trains to the iteration limit")

    def total_iterations(self, iterations_per_epoch: float) -> int:
        """The iteration at which training stops, for progress and schedules."""
        bounds = []
        if self.max_iterations is not None:
            bounds.append(self.max_iterations)
        if self.max_epochs is not None:
            bounds.append(math.ceil(self.max_epochs * iterations_per_epoch))
        return min(bounds)


class AnyOf:
    """Fires when any of its triggers fires (e.g. every N iterations, and at the end)."""

    def __init__(self, *triggers):
        self.triggers = triggers

    def __call__(self, trainer) -> bool:
        for trigger in self.triggers:
            if trigger(trainer):
                return True
        return False

    def first_firing(self, iteration: int) -> int | None:
        """The earliest of its triggers' (None when one of them cannot tell)."""
        firsts = [first_firing(trigger, iteration) for trigger in self.triggers]
        return None if None in firsts else min(firsts)


class StopRequested:
    """Fires at the iteration an extension (or the time limit) asked the run to stop
    (:meth:`~.trainer.Trainer.request_stop`): the last one, evaluated and logged."""

    def __call__(self, trainer) -> bool:
        return trainer.stop_requested

    def first_firing(self, iteration: int) -> float:
        return math.inf  # it fires only on a stop request, where every trigger is asked

    def __repr__(self):
        return "STOP_REQUESTED"


STOP_REQUESTED = StopRequested()


def first_firing(trigger, iteration: int):
    """``trigger``'s ``first_firing(iteration)`` (see the module); None without the method."""
    method = getattr(trigger, "first_firing", None)
    return None if method is None else method(iteration)


class Asked:
    """``trigger`` asked only where it can fire (see the module): :meth:`__call__` is
    ``trigger(trainer)`` wherever that can be True. ``always``: it fires every iteration
    (``(1, 'iteration')``), so it is never asked; ``due``: the first iteration it is asked at
    again (0: every iteration)."""

    __slots__ = ("trigger", "always", "due", "scheduled")

    def __init__(self, trigger):
        self.trigger = trigger
        self.always = isinstance(trigger, IntervalTrigger) and trigger.unit == "iteration" \
            and trigger.period == 1
        self.scheduled = first_firing(trigger, 0) is not None
        self.due = 0

    def __call__(self, trainer) -> bool:
        if self.always:
            return True
        iteration = trainer.updater.iteration
        if iteration < self.due and not trainer.stop_requested:
            return False
        return self.ask(trainer, iteration)

    def ask(self, trainer, iteration: int) -> bool:
        """``trigger(trainer)`` at ``iteration``, and where it is due next."""
        fired = self.trigger(trainer)
        if self.scheduled:
            self.due = first_firing(self.trigger, iteration + 1)
        return fired
