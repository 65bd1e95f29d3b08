"""Weight averaging from the config: ``trainer.ema_decay`` and ``trainer.swa``, checked and
registered as the training loop's extensions
(:mod:`trainer_run.training.extensions.weight_average`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainer_run import averaging
from trainer_run.console import warn
from trainer_run.errors import ConfigError, check, check_number
from trainer_run.training import Trainer, triggers
from trainer_run.training.extensions import Evaluator
from trainer_run.training.extensions.weight_average import ExponentialAverage, StochasticAverage
from trainer_run.updaters.protocol import main_store

NAMES = (averaging.EMA, averaging.SWA)
"""The names of the averaging extensions (a callback may not take them)."""


@dataclass
class Averages:
    """The averaging extensions of a run (None: off)."""

    ema: ExponentialAverage | None = None
    swa: StochasticAverage | None = None
    summaries: list = field(default_factory=list)
    """Functions returning what ``summary.json`` adds (the SWA evaluation)."""

    def best_params(self, params):
        """The function giving the weights of a best checkpoint (``model_best.npz``): the EMA
        weights when the objective ranks them, else ``params``, the model's own."""
        return self.ema.arrays if self.ema is not None and self.ema.chosen else params


def ema_decay(value) -> float | None:
    """``trainer.ema_decay``: None (off), or a number in (0, 1)."""
    if value is None:
        return None
    decay = check_number("trainer.ema_decay", value, low=0, low_open=True)
    check(decay < 1, f"trainer.ema_decay must be < 1 (the weight of the average so far, e.g. "
          f"0.999), got {value!r}")
    return decay


def check_objective(metric: str, decay: float | None) -> None:
    """Refuses an objective measured with averaged weights that the run does not have: the
    EMA's without ``trainer.ema_decay``, SWA's (measured once, after training) ever."""
    if averaging.ranks_ema(metric):
        check(decay is not None, f"objective.metric={metric} measures the EMA weights; set "
              "trainer.ema_decay (e.g. 0.999) to keep them")
    check(not metric.startswith(averaging.prefix("val", averaging.SWA)),
          f"objective.metric={metric}: the SWA weights are measured once, after training, so "
          "nothing may choose by them; choose a val/ or val/ema/ metric")


class SwaPoints:
    """The averaging points of ``trainer.swa``: where ``interval`` (a trigger) fires at or
    after the start, ``start_iteration`` (an iteration) or ``start_epoch`` (an epoch count)."""

    def __init__(self, interval, start_iteration: int | None = None,
                 start_epoch: float | None = None):
        self.interval = interval
        self.start_iteration = start_iteration
        self.start_epoch = start_epoch

    def started(self, trainer) -> bool:
        updater = trainer.updater
        if self.start_epoch is not None:
            return updater.epoch_detail >= self.start_epoch
        return updater.iteration >= self.start_iteration

    def __call__(self, trainer) -> bool:
        return self.started(trainer) and self.interval(trainer)


def swa_points(section: dict, total: int) -> SwaPoints | None:
    """The averaging points of the ``trainer.swa`` section for a run of ``total`` iterations:
    ``start`` a fraction of the run in [0, 1) (``0.75``: from iteration ``ceil(0.75 *
    total)``), iterations (``1500``; 0: from the start) or epochs (``3epoch``, ``0.5epoch``);
    ``interval`` as the other intervals (``1epoch``, ``200``). None when ``start`` is null
    (SWA off)."""
    start = section.get("start")
    if start is None:
        return None
    interval = triggers.interval("trainer.swa.interval", section.get("interval"))
    if isinstance(start, float):
        if not 0 <= start < 1:
            raise ConfigError(f"trainer.swa.start={start}: a number with a point is a fraction "
                              "of the run, in [0, 1); write iterations (1500) or epochs (3epoch) "
                              "otherwise")
        return SwaPoints(interval, start_iteration=math.ceil(start * total))
    if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
        return SwaPoints(interval, start_iteration=start)
    try:
        written = triggers.interval("trainer.swa.start", start)
    except ConfigError:
        raise ConfigError(f"trainer.swa.start={start} is neither a fraction of the run (0.75), "
                          "a number of iterations (1500) nor of epochs (3epoch, 0.5epoch)") from None
    if written.unit == "epoch":
        return SwaPoints(interval, start_epoch=written.period)
    return SwaPoints(interval, start_iteration=written.period)


def register(trainer: Trainer, run, t: dict, evaluate_at, objective_metric: str,
             rank: int, metrics=None) -> Averages:
    """Checks ``trainer.ema_decay`` and ``trainer.swa`` (``t``: the trainer section) and
    registers their extensions on ``trainer``: the EMA on every rank (its evaluation, at
    ``evaluate_at``, may be the objective every rank follows), SWA on rank 0. Their
    evaluations measure the run's ``metrics`` too (:func:`trainer_run.metrics.build`'s; None:
    the model's own). Register it after the evaluator: both are writers of the same
    iteration."""
    decay = ema_decay(t.get("ema_decay"))
    check_objective(objective_metric, decay)
    points = swa_points(t.get("swa") or {}, run.total)
    out = trainer.out if rank == 0 else None
    found = Averages()
    if decay is not None:
        evaluator = Evaluator(run.data.val, run.model, run.batch_size, run.backend,
                              prefix=averaging.prefix("val", averaging.EMA), metrics=metrics)
        found.ema = ExponentialAverage(main_store(trainer.updater), decay, evaluator,
                                       evaluate_at, run.backend, out,
                                       chosen=averaging.ranks_ema(objective_metric))
        trainer.extend(found.ema)
    if points is not None and rank == 0:
        evaluators = [Evaluator(split, run.model, run.batch_size, run.backend,
                                prefix=averaging.prefix(name, averaging.SWA), metrics=metrics)
                      for name, split in (("val", run.data.val), ("test", run.data.test))
                      if split is not None]
        found.swa = StochasticAverage(main_store(trainer.updater), points, run.model,
                                      run.data.train, run.batch_size, run.backend, out,
                                      evaluators, report=warn,
                                      describe=f"trainer.swa.start={t['swa']['start']}")
        trainer.extend(found.swa)
        found.summaries.append(found.swa.summary)
    return found
