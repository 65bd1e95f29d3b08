"""The learning-rate range test (Leslie Smith, "Cyclical Learning Rates for Training Neural
Networks", 2015) with the rules of PyTorch Lightning's ``Tuner.lr_find``
(``lightning/pytorch/tuner/lr_finder.py``, Lightning 2.6, read at commit 7f0c343): train with a
learning rate that grows at every step from ``min_lr`` to ``max_lr``, follow the smoothed
loss, and suggest the rate where it falls fastest.

Each rule is Lightning's, with its defaults (:class:`Settings`):

- **Rates** (:func:`learning_rates`): step 0 trains at ``min_lr``; step ``i >= 1`` at
  ``min_lr * (max_lr / min_lr) ** ((i + 1) / num_training)`` (``mode: exponential``) or
  ``min_lr + (i + 1) / num_training * (max_lr - min_lr)`` (``linear``). Lightning's
  ``_ExponentialLR`` and ``_LinearLR`` are stepped once when built and once after every
  step, so step 1 already has exponent ``2 / num_training``, and the last step trains at
  ``max_lr``.
- **Smoothing** (:class:`Smoother`): ``avg = beta * avg + (1 - beta) * loss`` with ``beta``
  0.98 from ``avg = 0``, and the smoothed loss of the ``k``-th step (``k`` from 1) is
  ``avg / (1 - beta ** (k + 1))``: Lightning divides by ``1 - beta ** (global_step + 1)``
  after ``global_step`` has counted the step.
- **Early stop** (:meth:`Trace.add`): from the 2nd step on, a smoothed loss above
  ``early_stop_threshold`` times the best smoothed loss so far ends the test after that step,
  whose point is kept (null: never). The best starts at the 1st step's value. As in Lightning
  the rule takes the loss to be positive.
- **A non-finite loss** (NaN or infinite) ends the test after its step too (ours). Lightning
  goes on to ``num_training`` steps, but its average is then NaN or infinite for good, and the
  suggestion leaves those points out, so it suggests the same rate.
- **Suggestion** (:func:`suggestion`): of the points after the first ``skip_begin`` and before
  the last ``skip_end``, the finite ones (at least 2, else none); the slope of their smoothed
  loss, ``numpy.gradient(losses, x)`` (second-order central differences on uneven spacing,
  first-order at both ends, as ``torch.gradient``), against ``x = log(rate)`` for
  ``exponential`` and ``x = rate`` for ``linear``; the rate of its minimum, the steepest
  descent (the first such point on a tie). On evenly spaced points this is the point Lightning
  up to 2.5.2 chose (``numpy.gradient(losses)``, unit spacing) and the one of Lightning's
  open fix #21171. Lightning 2.5.3 to 2.6 (#21055) takes the slope against the rate itself
  in both modes, which on a log ladder weighs the tiny first rates' noise most and suggests
  them (Lightning's open issue #21141: on spirals with Adam it suggests 2e-7); we do not
  follow it there. We compute in float64 (Lightning in float32). ``skip_end: 0`` keeps the
  last point (Lightning's ``[skip_begin:-0]`` keeps none).

:class:`RangeTest` runs the test as the trainer's only extension: it sets each step's rate on
the optimizer (``set_learning_rate``; the run's scheduler is not built) and reads each loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy

from .. import host_reads
from ..errors import check, check_choice, check_number
from .extension import PRIORITY_WRITER, Extension

BETA = 0.98
"""The smoothing factor of the loss (Lightning's ``_LRCallback`` default)."""
MODES = ("exponential", "linear")
KEY = "trainer.lr_find"
"""Where the settings are in the config."""
STOP_REASON = "lr_find"
"""The trainer's stop reason when the test ends before ``num_training`` steps."""


@dataclass(frozen=True)
class Settings:
    """The test's settings, with Lightning's defaults (``Tuner.lr_find`` and
    ``_LRFinder.suggestion``)."""

    min_lr: float = 1e-8
    max_lr: float = 1.0
    num_training: int = 100
    mode: str = "exponential"
    early_stop_threshold: float | None = 4.0
    skip_begin: int = 10
    skip_end: int = 1


def settings(section: dict) -> Settings:
    """The checked :class:`Settings` of the config's ``trainer.lr_find`` ``section`` (its
    ``enabled`` aside); a bad value is one line naming its key."""
    known = {k: v for k, v in section.items() if k != "enabled"}
    unknown = sorted(set(known) - set(Settings.__dataclass_fields__))
    check(not unknown, f"{KEY}.{unknown[0] if unknown else ''} is not a setting of the range test; "
          f"choose among {', '.join(Settings.__dataclass_fields__)}")
    given = Settings(**known)
    low = check_number(f"{KEY}.min_lr", given.min_lr, low=0, low_open=True)
    high = check_number(f"{KEY}.max_lr", given.max_lr, low=0, low_open=True)
    check(low < high, f"{KEY}.min_lr={given.min_lr} must be below {KEY}.max_lr={given.max_lr}: "
          "the rate grows from the first to the second")
    begin = check_number(f"{KEY}.skip_begin", given.skip_begin, low=0, integer=True)
    end = check_number(f"{KEY}.skip_end", given.skip_end, low=0, integer=True)
    steps = check_number(f"{KEY}.num_training", given.num_training, low=1, integer=True)
    check(steps >= begin + end + 2, f"{KEY}.num_training={steps} leaves fewer than 2 points "
          f"for the suggestion once skip_begin={begin} and skip_end={end} are left out: raise "
          f"it to at least {begin + end + 2}")
    mode = check_choice(f"{KEY}.mode", given.mode, MODES)
    threshold = given.early_stop_threshold
    if threshold is not None:
        threshold = check_number(f"{KEY}.early_stop_threshold", threshold, low=1)
    return Settings(low, high, steps, mode, threshold, begin, end)


def learning_rates(test: Settings) -> list[float]:
    """The rate of each of the ``num_training`` steps (see the module docstring)."""
    low, high, n = test.min_lr, test.max_lr, test.num_training
    if test.mode == "exponential":
        grown = [low * (high / low) ** ((i + 1) / n) for i in range(1, n)]
    else:
        grown = [low + (i + 1) / n * (high - low) for i in range(1, n)]
    return [low, *grown]


class Smoother:
    """The smoothed loss: the average of the losses so far with weights ``beta`` (a running
    average from 0), bias-corrected by Lightning's ``1 - beta ** (k + 1)`` at the ``k``-th
    loss."""

    def __init__(self, beta: float = BETA):
        self.beta = beta
        self.average = 0.0
        self.count = 0

    def __call__(self, loss: float) -> float:
        """The smoothed loss once ``loss`` is added."""
        self.count += 1
        self.average = self.beta * self.average + (1 - self.beta) * loss
        return self.average / (1 - self.beta ** (self.count + 1))


@dataclass
class Trace:
    """The points of a test so far: each step's rate, loss and smoothed loss, and why it
    ended early (None while it goes on, or when it ran all its steps)."""

    test: Settings
    rates: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    smoothed: list[float] = field(default_factory=list)
    stopped: str | None = None
    best: float = math.inf
    smoother: Smoother = field(default_factory=Smoother)

    def add(self, rate: float, loss: float) -> bool:
        """Records the step trained at ``rate`` with ``loss``; whether the test goes on."""
        value = self.smoother(loss)
        step = len(self.smoothed) + 1
        self.rates.append(rate)
        self.losses.append(loss)
        self.smoothed.append(value)
        threshold = self.test.early_stop_threshold
        if not math.isfinite(value):
            self.stopped = "non-finite"
        elif threshold is not None and step > 1 and value > threshold * self.best:
            self.stopped = "diverging"
        if value < self.best or step == 1:
            self.best = value
        return self.stopped is None

    def suggestion(self) -> int | None:
        """The index of the suggested point (:func:`suggestion`), or None."""
        test = self.test
        return suggestion(self.rates, self.smoothed, test.skip_begin, test.skip_end, test.mode)


def trace(losses, test: Settings) -> Trace:
    """The test on a given sequence of ``losses``, one per step (the rates of
    :func:`learning_rates`), up to where it ends."""
    traced = Trace(test)
    for rate, loss in zip(learning_rates(test), losses):
        if not traced.add(rate, float(loss)):
            break
    return traced


def suggestion(rates, losses, skip_begin: int = 10, skip_end: int = 1,
               mode: str = "exponential") -> int | None:
    """The index of the point of steepest descent of ``losses`` against ``rates`` (their
    logarithm in ``exponential`` mode; see the module docstring), or None with fewer than 2
    finite points to compare."""
    kept = [i for i in range(skip_begin, len(losses) - skip_end) if math.isfinite(losses[i])]
    if len(kept) < 2:
        return None
    x = numpy.array([rates[i] for i in kept], dtype=numpy.float64)
    slopes = numpy.gradient(numpy.array([losses[i] for i in kept], dtype=numpy.float64),
                            numpy.log(x) if mode == "exponential" else x)
    return kept[int(numpy.argmin(slopes))]


class RangeTest(Extension):
    """The test as an extension of the trainer that trains it: before the first step it sets
    ``min_lr`` on ``optimizer``; after each step it records the step's loss
    (``trainer.observation["loss"]``), ends the run when the :class:`Trace` ends
    (``request_stop``) and sets the next step's rate. The trainer's stop trigger ends it after
    ``num_training`` steps."""

    trigger = (1, "iteration")
    priority = PRIORITY_WRITER
    name = "lr_find"

    def __init__(self, test: Settings, optimizer):
        self.rates = learning_rates(test)
        self.optimizer = optimizer
        self.trace = Trace(test)

    def initialize(self, trainer) -> None:
        self._set(0)

    def __call__(self, trainer) -> None:
        step = len(self.trace.rates)
        loss = host_reads.scalar(trainer.observation["loss"])
        if not self.trace.add(self.rates[step], loss):
            trainer.request_stop(STOP_REASON)
        elif step + 1 < len(self.rates):
            self._set(step + 1)

    def _set(self, step: int) -> None:
        self.optimizer.set_learning_rate(self.rates[step])
