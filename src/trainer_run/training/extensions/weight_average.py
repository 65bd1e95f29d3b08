"""Weight averaging in the training loop: the exponential moving average of the parameters
(:class:`ExponentialAverage`, ``trainer.ema_decay``) and stochastic weight averaging
(:class:`StochasticAverage`, ``trainer.swa``); the averages are :mod:`trainer_run.averaging`'s.

Both are writers (:data:`~..extension.PRIORITY_WRITER`): they read the update just made and,
for the EMA, add its evaluation to the trainer's observation before the editors (the
objective) and readers (the log, the checkpoint) of the iteration. Their averages and counters
are their checkpointed state, so a resumed run continues them bit for bit.
"""

from __future__ import annotations

from pathlib import Path

from trainer_run.storage import run_files

from ... import averaging
from ...bn_update import update_bn
from ...storage import npz
from ..extension import PRIORITY_WRITER, Extension


class ExponentialAverage(Extension):
    """The exponential moving average of the main model's parameters (``store``, a
    :class:`~trainer_run.params.ParamStore`) with ``decay``: it starts from the parameters the
    run starts with (a resumed run's are in its checkpoint) and takes in every update whose
    step was kept (the updater's ``kept``), after the step. Batch normalization's running
    statistics are not averaged: the EMA weights are used with the live model's (as timm's
    ``ModelEmaV3(apply_buffer_ema=False)``).

    At each iteration where ``evaluate_at(trainer)`` holds (the evaluator's trigger), the EMA
    weights are measured by ``evaluator`` (an :class:`~.evaluator.Evaluator` whose prefix is
    ``val/ema/``), swapped into the model for it and out again, and its metrics join the
    observation. ``out`` (rank 0's run folder; None: another rank's, which writes nothing):
    where ``model_ema.npz`` (the EMA weights and the live persistent values, by path) is
    written when the run completes or is interrupted. ``chosen``: the run's objective ranks
    the EMA weights (its metric is ``val/ema/...``), which the checkpoints record, so that the
    run's best weights are read as the EMA's (:func:`trainer_run.runs.checkpoint_tree.chosen_params`).
    """

    priority = PRIORITY_WRITER
    name = averaging.EMA

    def __init__(self, store, decay: float, evaluator, evaluate_at, backend, out=None,
                 chosen: bool = False):
        self.average = averaging.Average(store)
        self.decay = decay
        self.evaluator = evaluator
        self.evaluate_at = evaluate_at
        self.backend = backend
        self.out = out
        self.chosen = chosen

    def initialize(self, trainer) -> None:
        if not self.average.started:
            self.average.start()

    def __call__(self, trainer) -> None:
        self.average.exponential(self.decay, trainer.updater.kept)
        if self.evaluate_at(trainer):
            trainer.updater.settle()
            with self.average.swapped_in():
                metrics = self.evaluator.evaluate()
            trainer.observation.update(metrics)

    def arrays(self) -> dict:
        """The EMA weights and the live model's persistent values, host arrays by path."""
        return self.average.arrays(self.backend.to_numpy)

    def finalize(self, trainer) -> None:
        if self.out is not None and trainer.status in ("completed", "interrupted"):
            npz.save(Path(self.out) / run_files.EMA_MODEL, self.arrays(), run=Path(self.out))

    def state_dict(self) -> dict:
        return {**self.average.state_dict(self.backend.to_numpy), "decay": self.decay,
                averaging.CHOSEN: self.chosen}

    def load_state_dict(self, state: dict) -> None:
        self.average.load_state_dict(state, self.backend.asarray)


class StochasticAverage(Extension):
    """Stochastic weight averaging (Izmailov et al., PyTorch's ``swa_utils``): at each
    iteration where ``at(trainer)`` holds (the averaging interval, from the start of the
    averaging on), the main model's parameters (``store``) join an equal-weight average
    (:meth:`~trainer_run.averaging.Average.equal`).

    When the run completes, the averaged weights are put into ``model`` with the running
    statistics of its batch normalization layers recomputed over ``train`` (a pass in batches
    of ``batch_size``: :func:`~trainer_run.bn_update.update_bn`), measured by each of
    ``evaluators`` (prefixes ``val/swa/``, ``test/swa/``) into :attr:`metrics`, and written
    with those statistics to ``model_swa.npz`` in ``out``; then the model is given back its
    own weights and statistics, so the last checkpoint and ``model.npz`` hold the trained
    model. The validation metrics are logged (:meth:`logged`, the log's row at the last
    iteration) and written to ``summary.json`` (:meth:`summary`). ``report`` is told, in one
    line, when no averaging point was reached (nothing is then written).

    Registered on rank 0 alone: nothing of the run's course depends on it.
    """

    priority = PRIORITY_WRITER
    name = averaging.SWA

    def __init__(self, store, at, model, train, batch_size: int, backend, out, evaluators=(),
                 report=None, describe: str = ""):
        self.average = averaging.Average(store)
        self.at = at
        self.model = model
        self.train = train
        self.batch_size = batch_size
        self.backend = backend
        self.out = out
        self.evaluators = list(evaluators)
        self.report = report
        self.describe = describe
        self.metrics: dict = {}
        """After the run completed: the evaluators' metrics of the SWA weights."""
        self.record: dict = {}
        """After the run completed: ``averaged`` (the averaging points taken in) and
        ``bn_batches`` (the batches the statistics were recomputed over; 0: no batch
        normalization)."""

    def __call__(self, trainer) -> None:
        if self.at(trainer):
            trainer.updater.settle()
            self.average.equal()

    def finalize(self, trainer) -> None:
        if trainer.status != "completed":
            return
        if self.average.count == 0:
            if self.report is not None:
                self.report(f"{self.describe}: the run ended before its first averaging point, "
                            f"so there is no SWA model (no {run_files.SWA_MODEL}); start earlier")
            return
        with self.average.swapped_in():
            batches = update_bn(self.model, self.train, self.batch_size, self.backend)
            for evaluator in self.evaluators:
                self.metrics.update(evaluator.evaluate())
            arrays = self.average.store.state_dict(self.backend.to_numpy)
        self.record = {"averaged": self.average.count, "bn_batches": batches}
        npz.save(Path(self.out) / run_files.SWA_MODEL, arrays, run=Path(self.out))

    def logged(self) -> dict:
        """The metrics of the log's row of the SWA weights (``val/swa/...``, after the run
        completed; else nothing): the evaluation is a record like the EMA's."""
        return {k: v for k, v in self.metrics.items()
                if k.startswith(averaging.prefix("val", averaging.SWA))}

    def summary(self) -> dict:
        """What ``summary.json`` adds of it: the metrics, and the record under ``swa``
        (nothing before the run completed)."""
        return {**self.metrics, averaging.SWA: self.record} if self.record else {}

    def state_dict(self) -> dict:
        return self.average.state_dict(self.backend.to_numpy)

    def load_state_dict(self, state: dict) -> None:
        self.average.load_state_dict(state, self.backend.asarray)
