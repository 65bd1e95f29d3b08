"""The training loop's extensions from the config: evaluation, the objective, early stopping,
the log, console output, checkpoints and the summary, then the user's ``callbacks``."""

from __future__ import annotations

from pathlib import Path

from trainer_run import metrics, module, schedulers
from trainer_run.console import warn
from trainer_run.errors import ConfigError, check_number
from trainer_run.metrics.confusion_files import ConfusionFiles
from trainer_run.runner import averages
from trainer_run.runs import weights
from trainer_run.targets import instantiate
from trainer_run.training import AnyOf, Trainer, extension, loggers, triggers
from trainer_run.training.extensions import (
    EarlyStopping,
    Evaluator,
    HeldOutEvaluator,
    LogFinish,
    LogReport,
    MetricsTable,
    Objective,
    PlateauStep,
    ProfileReport,
    Progress,
    Readout,
    Snapshot,
    Summary,
)
from trainer_run.updaters.protocol import main_store


def extend(trainer: Trainer, run, config: dict, extra: dict | None) -> None:
    """The extensions of ``trainer`` for the built ``run``. Every rank evaluates and follows the
    objective (a plateau schedule and early stopping decide the same way everywhere); rank 0
    alone logs (to the loggers of ``config["logger"]``, built on every rank so that a missing
    one stops them all), shows progress, checkpoints and writes the summary.

    The user's ``callbacks`` are registered first, on every rank (one that stops the run must
    decide the same way on each), by name (their state is kept in checkpoints under it): at
    equal priority they run before ours, so a stop they request at an iteration is that
    iteration's for the log, the checkpoint and the summary (and, for a callback of
    ``PRIORITY_WRITER``, for the evaluation too)."""
    t, updater, optimizer = config["trainer"], trainer.updater, run.optimizer
    for name, callback in _callbacks(config, loggers.RunInfo(config)).items():
        trainer.extend(callback, name=name)
    eval_trigger = _every(t, "eval_interval", run.stop)
    measured = _metrics(config, run, Path(trainer.out) if updater.rank == 0 else None)
    trainer.extend(Evaluator(run.data.val, run.model, run.batch_size, run.backend,
                             metrics=measured), trigger=eval_trigger)
    goal = config["objective"]
    averaged = averages.register(trainer, run, t, eval_trigger, goal["metric"], updater.rank,
                                 measured)
    if isinstance(optimizer.lr_scheduler, schedulers.ReduceOnPlateauScheduler):
        trainer.extend(PlateauStep(optimizer.lr_scheduler), trigger=eval_trigger)
    objective = Objective(goal["metric"], goal["mode"], eval_trigger, t["keep_best"])
    trainer.extend(objective)
    stopping = t["early_stopping"]
    if stopping["patience"] is not None:
        trainer.extend(EarlyStopping(objective, stopping["patience"], stopping["min_delta"]))
    info = loggers.RunInfo(config, objective, written=(extra or {}).get("config"))
    sinks = loggers.build(config.get("logger", loggers.BEFORE_THE_GROUP), info)
    if updater.rank == 0:
        _extend_rank_0(trainer, run, t, objective, extra or {}, sinks, info, averaged, measured)


OURS = (*(klass.name for klass in (Evaluator, PlateauStep, Objective, EarlyStopping,
                                   HeldOutEvaluator, LogReport, Progress, MetricsTable, Snapshot,
                                   Summary, LogFinish, ProfileReport)), *averages.NAMES)
"""The names of our extensions, which a callback may not take."""


def _callbacks(config: dict, info: loggers.RunInfo) -> dict:
    """The user's callbacks by name, built (an entry set to null is removed), each as a
    :class:`~trainer_run.training.extension.UsersCallback`: what it raises names it."""
    sections = {name: s for name, s in (config.get("callbacks") or {}).items() if s is not None}
    taken = sorted(set(sections) & set(OURS))
    if taken:
        raise ConfigError(f"callbacks.{taken[0]}: {taken[0]} is the name of one of trainer-run's "
                          f"own extensions ({', '.join(OURS)}); name your callback otherwise")
    return {name: extension.UsersCallback(f"callbacks.{name}", instantiate(
        f"callbacks.{name}", dict(section), {"run": info}, kind=extension.KIND))
        for name, section in sections.items()}


def _metrics(config: dict, run, out: Path | None):
    """The run's ``metrics`` (:func:`trainer_run.metrics.build`; None: none), whose confusion
    matrices go into ``out`` (None: not kept, on the ranks that write nothing)."""
    data = run.data
    return metrics.build(config.get("metrics") or [], data.task, run.model, data.out_size,
                         data.classes, ConfusionFiles(out) if out is not None else None)


def _extend_rank_0(trainer: Trainer, run, t: dict, objective: Objective, extra: dict,
                   sinks: list, info: loggers.RunInfo, averaged: averages.Averages,
                   measured=None) -> None:
    store = main_store(trainer.updater)

    def params() -> dict:
        return store.state_dict(run.backend.to_numpy)

    keep = t["keep_checkpoints"]
    if keep is not None:
        keep = check_number("trainer.keep_checkpoints", keep, low=1, integer=True)
    snapshot = Snapshot(keep, extra=extra, objective=objective,
                        params=averaged.best_params(params))

    def best() -> tuple | None:
        """The best evaluation's (iteration, parameters): this session's, else the run's on disk."""
        if snapshot.best is not None:
            return snapshot.best
        found = weights.best(Path(trainer.out))
        return None if found is None else (found.iteration, found.arrays())

    held_out = None
    if run.data.test is not None:
        held_out = HeldOutEvaluator(Evaluator(run.data.test, run.model, run.batch_size, run.backend,
                                              prefix="test/", metrics=measured),
                                    best, store, run.backend,
                                    averaged=averaged.ema.name if averaged.ema is not None
                                    and averaged.ema.chosen else None)
        trainer.extend(held_out)
        info.held_out = held_out  # the loggers mark its metrics when they close
    log_report = LogReport(_every(t, "log_interval", run.stop), run.optimizer, sinks, report=warn,
                           late=[averaged.swa.logged] if averaged.swa is not None else [])
    trainer.extend(log_report)
    readout = Readout(run.total, run.samples, log_report, objective, run.optimizer)
    trainer.extend(Progress(readout, live=t["progress"]))
    trainer.extend(MetricsTable(log_report, held_out=held_out,
                                leave_out=measured.per_class if measured is not None else None))
    every = triggers.interval("trainer.checkpoint_interval", t["checkpoint_interval"])
    trainer.extend(snapshot, trigger=AnyOf(every, objective.entered))
    trainer.extend(Summary(log_report, run.samples, store, run.backend.to_numpy,
                           held_out=held_out, model=module.summary(run.model),
                           objective=objective, overrides=extra.get("overrides"),
                           init_from=extra.get("init_from"),
                           device=run.backend.device_record(), more=averaged.summaries))
    trainer.extend(LogFinish(log_report, report=warn))  # after the summary: loggers may send it
    if trainer.profiler.enabled:
        trainer.profiler.origin = log_report.origin  # start-up is a stage of the profile
        quiet = {} if run.kvstore is not None else {"communication": "no kvstore: nothing exchanged"}
        trainer.extend(ProfileReport(trainer.profiler, notes=quiet))


def _every(t: dict, key: str, stop) -> AnyOf:
    """Every ``trainer.<key>`` (iterations, or epochs: :func:`~trainer_run.training.triggers.interval`),
    and at the last iteration (its limit, or early stopping)."""
    return AnyOf(triggers.interval(f"trainer.{key}", t[key]), stop, triggers.STOP_REQUESTED)
