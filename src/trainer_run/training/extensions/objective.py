"""The run's objective: what "better" means, the best value so far, and early stopping.

:class:`Objective` reads one metric at each evaluation and keeps the best value, the iteration
where it happened, the latest value, and the ranking of the ``keep`` best evaluations (Lightning's
``ModelCheckpoint(monitor, mode, save_top_k)``), which the snapshot uses to keep their
checkpoints. :class:`EarlyStopping` stops the run after ``patience`` evaluations without an
improvement of at least ``min_delta`` (Lightning's ``EarlyStopping``). Both are part of the
checkpoint, so a resumed run ranks and counts on from where it was.
"""

from __future__ import annotations

import math

from ... import host_reads
from ...backend import array_module
from ...errors import ConfigError, check, check_number
from ..extension import PRIORITY_EDITOR, Extension
from ..trainer import metric_name
from ..triggers import first_firing

MODES = ("min", "max")


class Objective(Extension):
    """Follows ``metric`` (``val/<name>``: the evaluator's value; ``train/<name>``: the mean
    of the training step's ``<name>`` in the trainer's observation over the iterations since
    the previous evaluation) at each iteration where ``at(trainer)`` holds (the evaluator's
    trigger). It reads ``trainer.observation`` only.

    ``mode`` ``min`` or ``max`` says which way is better. :attr:`best` and
    :attr:`best_iteration` are the best finite value and its iteration (None before one),
    :attr:`final` the latest value (NaN included). :attr:`top` holds the ``keep`` best
    evaluations as ``[value, iteration]``, best first; :attr:`entered_at` is the iteration of
    the latest evaluation that entered it. A metric missing from an evaluation raises
    :class:`~trainer_run.errors.ConfigError` naming the metrics there are.

    An editor: it reads the evaluator's metrics (a writer) of the same iteration; register it
    before :class:`EarlyStopping`, which reads its verdict, and it runs before the readers
    (the console shows its values, the snapshot keeps the checkpoints it ranks).
    """

    priority = PRIORITY_EDITOR
    name = "objective"

    def __init__(self, metric: str, mode: str, at, keep: int = 1):
        check(isinstance(metric, str) and "/" in metric and metric.split("/")[0] in ("val", "train"),
              f"objective.metric={metric!r} must name a validation or training metric: val/<name> "
              "(e.g. val/loss, val/accuracy) or train/<name>; test/ metrics are measured once, "
              "after training, so nothing may choose by them")
        check(mode in MODES, f"objective.mode={mode!r} is unknown; choose min or max")
        self.metric = metric
        self.mode = mode
        self.at = at
        if not metric.startswith("train/"):
            self.trigger = at  # nothing to sum in between: called where it evaluates alone
        self.entered = Entered(self)
        """Trigger: whether this iteration's evaluation entered the best ``keep``."""
        self.keep = check_number("trainer.keep_best", keep, low=0, integer=True)
        self.best = None
        self.best_iteration = None
        self.final = None
        self.top: list[list] = []
        self.entered_at = None
        self.evaluated_at = None
        self._sum = 0.0
        self._count = 0

    def better(self, value: float, than: float | None) -> bool:
        """Whether ``value`` is better than ``than`` (anything finite beats None; NaN nothing)."""
        if not math.isfinite(value):
            return False
        return than is None or (value < than if self.mode == "min" else value > than)

    def __call__(self, trainer) -> None:
        observation = trainer.observation
        name = self.metric.split("/", 1)[1]
        if self.metric.startswith("train/") and name in observation:  # the training step's
            value = observation[name]
            self._sum = self._sum + array_module(value).asarray(value, dtype="float64")
            self._count += 1
        if not self.at(trainer):
            return
        value = self._value(observation)
        iteration = trainer.updater.iteration
        self.final, self.evaluated_at = value, iteration
        if self.better(value, self.best):
            self.best, self.best_iteration = value, iteration
        if self.keep and (len(self.top) < self.keep or self.better(value, self.top[-1][0])):
            if math.isfinite(value):
                self.top.append([value, iteration])
                self.top.sort(key=lambda entry: entry[0], reverse=self.mode == "max")
                del self.top[self.keep:]
                self.entered_at = iteration

    def _value(self, observation: dict) -> float:
        if self.metric.startswith("train/"):
            if self._count == 0:
                raise ConfigError(self._missing(observation))
            value = host_reads.scalar(self._sum) / self._count
            self._sum, self._count = 0.0, 0
            return value
        if self.metric not in observation:
            raise ConfigError(self._missing(observation))
        return float(observation[self.metric])

    def _missing(self, observation: dict) -> str:
        names = sorted(metric_name(key) for key in observation)
        return (f"objective.metric={self.metric} is not among the metrics of this run "
                f"({', '.join(names)}); set objective.metric to one of them")

    @property
    def kept_iterations(self) -> list[int]:
        return [iteration for _, iteration in self.top]

    def summary(self) -> dict:
        """``metric``, ``mode``, ``best``, ``best_iteration`` and ``final`` (for summary.json)."""
        return {"metric": self.metric, "mode": self.mode, "best": self.best,
                "best_iteration": self.best_iteration, "final": self.final}

    def state_dict(self) -> dict:
        return {"best": self.best, "best_iteration": self.best_iteration, "final": self.final,
                "top": self.top, "sum": host_reads.scalar(self._sum), "count": self._count}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.best_iteration = state["best"], state["best_iteration"]
        self.final = state["final"]
        self.top = [list(entry) for entry in state["top"]][: self.keep]
        self._sum, self._count = float(state["sum"]), int(state["count"])


class Entered:
    """Trigger: whether the iteration's evaluation of ``objective`` entered its best ``keep``;
    it can fire only where the objective evaluates (its ``at``)."""

    def __init__(self, objective: Objective):
        self.objective = objective

    def __call__(self, trainer) -> bool:
        entered_at = self.objective.entered_at
        return entered_at is not None and entered_at == trainer.updater.iteration

    def first_firing(self, iteration: int):
        return first_firing(self.objective.at, iteration)


class EarlyStopping(Extension):
    """Stops the run (``trainer.request_stop("early_stopping")``) after ``patience``
    evaluations of ``objective`` in a row without an improvement of at least ``min_delta``
    over the reference, the last value that improved by that much (Lightning's rule). A NaN
    value is no improvement. The count and the reference are saved with the run, so an
    early-stopped run resumed with a larger budget trains to its next evaluation and stops
    there unless the objective improves (or ``patience`` was raised).

    An editor registered after its :class:`Objective` (it reads the objective's evaluation of
    the same iteration); its stop request comes before the readers, so that their triggers
    (the log's) fire at the iteration the run stops."""

    priority = PRIORITY_EDITOR
    name = "early_stopping"

    def __init__(self, objective: Objective, patience: int, min_delta: float = 0.0):
        self.objective = objective
        self.patience = check_number("trainer.early_stopping.patience", patience, low=1,
                                     integer=True)
        self.min_delta = check_number("trainer.early_stopping.min_delta", min_delta, low=0)
        self.reference = None
        self.wait = 0

    def __call__(self, trainer) -> None:
        if self.objective.evaluated_at != trainer.updater.iteration:
            return
        value = self.objective.final
        shifted = value + self.min_delta if self.objective.mode == "min" else value - self.min_delta
        if self.objective.better(shifted, self.reference):
            self.reference, self.wait = value, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            trainer.request_stop("early_stopping")

    def state_dict(self) -> dict:
        return {"reference": self.reference, "wait": self.wait}

    def load_state_dict(self, state: dict) -> None:
        self.reference, self.wait = state["reference"], int(state["wait"])
