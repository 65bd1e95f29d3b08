"""LogReport: averages observations between log points into rows, which loggers write;
LogFinish: tells the loggers how the run ended once its summary is written."""

from __future__ import annotations

import functools
import time
import warnings
from datetime import datetime
from typing import Callable

from ... import host_reads
from ...errors import UserCodeError
from .. import clock
from ..extension import PRIORITY_READER, Extension
from ..loggers import Logger
from ..loggers.jsonl import JsonLines
from ..trainer import metric_name
from ..triggers import Asked

TRAINING = "train/"
"""The prefix of the training step's metrics in a row (averaged over the log interval)."""
EVALUATED = "val/"
"""The prefix of an evaluation's metrics (logged at the iteration it ran, never averaged)."""


class LogReport(Extension):
    """Every iteration accumulates the trainer's observation; when ``log_trigger`` fires it
    makes one row: ``iteration``, ``epoch`` (epoch_detail), ``time`` (the wall clock, ISO 8601
    with the UTC offset), ``elapsed_s``, ``lr``, the updater's current ``readings()`` as
    they are (``loss_scale``, ``skipped_steps`` under dynamic loss scaling), and the mean of
    each observed metric since the previous log point (named by
    :func:`~..trainer.metric_name`: ``train/<name>`` for the training step's, validation keys
    as the evaluator reported them). Each of ``loggers`` (default:
    ``metrics.jsonl`` alone) receives the row.

    An evaluation is never averaged: its metrics (the keys under ``val/``: the evaluator's,
    the EMA's ``val/ema/``) are logged at the iteration it ran, as Lightning logs each
    validation. At a log point they join its row; at any other iteration they make a row of
    their own (``iteration``, ``epoch``, ``time``, ``elapsed_s`` and the evaluation's
    values), so every evaluation is one record in every logger. An evaluation made as the
    run ends, after its last iteration (SWA's, ``late``: functions returning metrics, asked
    when the run completed; their extensions are writers, which finalize first), is a row of
    its own at the last iteration, logged before the loggers close.

    ``elapsed_s`` counts from the run's start (:mod:`..clock`: the command's from its
    process's start, start-up included; a run from Python from when it is built), and, as
    the trainer's elapsed time, carries over a resume: the checkpoint keeps the value it had
    when it was written. The rows logged so far, that value and the running sums are part of
    the state, so a resumed run's loggers rewrite their files from the checkpoint's rows
    (:meth:`~..loggers.Logger.start`) and continue them identically.

    A logger whose ``close`` fails with an error of the user's code (a
    :class:`~trainer_run.errors.UserCodeError`, see :class:`~..loggers.UsersLogger`) does not
    change how the run ended: training and the run's own files are complete, so ``report``
    (default :func:`warnings.warn`) is told, naming the logger, and the others close. A disk
    that refuses our own logger's last write (a StorageError) still fails the run.

    A reader: the writers and editors of the iteration (the evaluator, the plateau step's
    learning rate, early stopping's request) come before it.
    """

    priority = PRIORITY_READER
    name = "log_report"

    def __init__(self, log_trigger, optimizer=None, loggers: list[Logger] | None = None,
                 report: Callable[[str], None] | None = None, late=()):
        self.log_trigger = log_trigger
        self._log_asked = Asked(log_trigger)  # asked only where it can fire
        self._names: dict = {}  # observation key -> metric name
        self.late = list(late)
        self.report = report or warnings.warn
        self.optimizer = optimizer
        self.loggers = [JsonLines()] if loggers is None else list(loggers)
        self.log: list[dict] = []
        self._sums: dict = {}
        self._counts: dict = {}
        self.origin = clock.job_origin()
        """The ``time.perf_counter`` reading at which this job started (:mod:`..clock`)."""
        self._elapsed_before = 0.0
        self.point: int | None = None
        """The iteration of this session's latest log point (a row of training means)."""

    @property
    def elapsed_s(self) -> float:
        """Seconds since the run started, plus those of the run before a resume."""
        return self._elapsed_before + time.perf_counter() - self.origin

    def initialize(self, trainer) -> None:
        for logger in self.loggers:
            logger.start(trainer.out, self.log)

    def __call__(self, trainer) -> None:
        evaluated = {}
        sums, counts, names = self._sums, self._counts, self._names
        for key, value in trainer.observation.items():
            name = names.get(key)
            if name is None:
                name = names[key] = metric_name(key)
            if name.startswith(EVALUATED):
                evaluated[name] = value
                continue
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1
        if self._log_asked(trainer):
            self._write(trainer, evaluated)
            self.point = trainer.updater.iteration
        elif evaluated:
            self._append(self._stamp(trainer), evaluated)

    def finalize(self, trainer) -> None:
        first = None
        late = functools.partial(self._log_late, trainer)
        for end in (late, *(logger.close for logger in self.loggers)):
            try:
                end()
            except UserCodeError as e:
                self.report(f"{e}; the run is {trainer.status} as it was, its own files complete")
            except Exception as e:
                first = first or e
        if first is not None:
            raise first

    def _log_late(self, trainer) -> None:
        """The row of the evaluations made as a completed run ends (``late``)."""
        late = {k: v for found in self.late for k, v in found().items()} \
            if trainer.status == "completed" else {}
        if late:
            self._append(self._stamp(trainer), late)

    def _stamp(self, trainer) -> dict:
        """A row's first keys: where and when."""
        updater = trainer.updater
        updater.settle()
        return {"iteration": updater.iteration, "epoch": updater.epoch_detail,
                "time": datetime.now().astimezone().isoformat(timespec="milliseconds"),
                "elapsed_s": self.elapsed_s}

    def _write(self, trainer, evaluated: dict) -> None:
        row = self._stamp(trainer)
        if self.optimizer is not None:
            row["lr"] = self.optimizer.learning_rate
        row.update(trainer.updater.readings())
        sums, counts = self._sums, self._counts
        self._sums, self._counts = {}, {}
        self._append(row, {**sums, **evaluated}, counts)

    def _append(self, row: dict, values: dict, counts: dict | None = None) -> None:
        """Logs ``row`` with ``values`` (read to the host in one read, sorted by name; a sum
        divided by its count in ``counts``) and gives it to the loggers."""
        names = sorted(values)
        read = host_reads.scalars([values[name] for name in names])
        counts = counts or {}
        row.update((name, value / counts.get(name, 1)) for name, value in zip(names, read))
        self.log.append(row)
        for logger in self.loggers:
            logger.write(row)

    def _read_sums(self) -> dict:
        """The running sums (kept on the device) as floats, in one read."""
        names = list(self._sums)
        return dict(zip(names, host_reads.scalars([self._sums[name] for name in names])))

    @property
    def last(self) -> dict:
        """The latest row (an evaluation's, or a log point's)."""
        return self.log[-1] if self.log else {}

    def latest_of(self, key: str):
        """The latest logged value of ``key`` (None when no row has one)."""
        return next((row[key] for row in reversed(self.log) if key in row), None)

    def latest(self) -> dict:
        """Each logged metric's (``train/``, ``val/``) latest value, in order of first logging."""
        found: dict = {}
        for row in self.log:
            found.update((k, v) for k, v in row.items() if k.startswith((TRAINING, EVALUATED)))
        return {k: found[k] for k in dict.fromkeys(k for row in self.log for k in row) if k in found}

    def state_dict(self) -> dict:
        return {"log": self.log, "sums": self._read_sums(),
                "counts": self._counts, "elapsed_s": self.elapsed_s}

    def load_state_dict(self, state: dict) -> None:
        self.log = list(state["log"])
        self._sums = dict(state["sums"])
        self._counts = dict(state["counts"])
        before = state.get("elapsed_s", self.last.get("elapsed_s"))  # absent before it was kept
        self._elapsed_before = float(before or 0.0)



class LogFinish(Extension):
    """When training ends, after the :class:`~.summary.Summary` (register it after that one):
    calls each of ``log_report``'s loggers' ``finish(status)`` (see
    :meth:`~..loggers.Logger.finish`; a logger without one is skipped) with the trainer's
    status as the summary recorded it. Training and the run's own files are complete by
    then, so what a logger raises does not change how the run ended: ``report`` (default
    :func:`warnings.warn`) is told, naming the logger, and the others finish."""

    priority = PRIORITY_READER
    name = "log_finish"

    def __init__(self, log_report: LogReport, report: Callable[[str], None] | None = None):
        self.log_report = log_report
        self.report = report or warnings.warn

    def finalize(self, trainer) -> None:
        for logger in self.log_report.loggers:
            finish = getattr(logger, "finish", None)
            if not callable(finish):
                continue
            try:
                finish(trainer.status)
            except Exception as e:
                self.report(f"{e}; the run is {trainer.status} as it was, its own files complete")
