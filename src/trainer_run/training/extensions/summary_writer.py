"""Summary: at the end of a run, ``summary.json`` and the final parameters in ``model.npz``."""

from __future__ import annotations

from pathlib import Path

import numpy

from trainer_run import devices
from trainer_run.runs import summary as run_summary
from trainer_run.storage import npz, run_files
from trainer_run.training.extension import PRIORITY_READER, Extension


class Summary(Extension):
    """Writes ``summary.json`` (``iteration``, ``epoch``, ``elapsed_s``, ``samples_per_s``,
    ``status``, ``stop_reason`` (the trainer's), ``overrides`` (the run's command-line
    overrides, when given), ``init_from`` (the weights a fine-tuned run started from: their
    file, which checkpoint, iteration, how many arrays loaded and which not), ``objective``
    (:meth:`~.objective.Objective.summary`, with an objective) and each ``train/*`` and
    ``val/*`` metric's latest logged value: :meth:`~.log_report.LogReport.latest`) and
    ``model.npz`` (parameters by path, loadable with ``numpy.load``) when training ends,
    however it ends.

    With ``held_out`` (a :class:`~.held_out.HeldOutEvaluator`), its ``test/*`` metrics are
    written too, and ``test_weights``: which weights they measured (``{"checkpoint": "best" |
    "last", "iteration": N}``); with ``model`` (:func:`trainer_run.models.summary`), the model's size under
    ``"model"``; with ``device`` (:meth:`~trainer_run.backend.Backend.device_record`), the
    backend and device the run trained on under ``"device"``, and the most memory the process
    held under ``"peak_memory_bytes"`` (:func:`trainer_run.devices.peak_memory`: ``host``, and
    ``gpu_pool`` on a GPU), a measurement like ``samples_per_s``; each of ``more`` (functions
    returning a dict, such as :meth:`~.weight_average.StochasticAverage.summary`) adds its
    fields. ``elapsed_s`` is the log's
    (:attr:`~.log_report.LogReport.elapsed_s`: since the job started, start-up included,
    carried over a resume), so it agrees with ``metrics.jsonl``;
    ``samples_per_s`` counts the samples of this session's iterations over the time they took
    (:attr:`~trainer_run.training.Trainer.updating_time`: the updates alone, not evaluation,
    checkpoints or logging).
    ``summary.json`` is strict JSON: a NaN or infinite value is written as ``null``. Both
    files are replaced atomically; a refused write raises
    :class:`~trainer_run.errors.StorageError` naming the file and leaves the old one.

    A reader registered after the :class:`~.snapshot.Snapshot`: it finalizes after the last
    checkpoint is written, so ``status`` says ``failed`` when that write failed; the held-out
    evaluator (a writer) has tested before it.
    """

    priority = PRIORITY_READER
    name = "summary"

    def __init__(self, log_report, samples_per_update: int, store, to_numpy=numpy.asarray,
                 held_out=None, model: dict | None = None, objective=None,
                 overrides: list[str] | None = None, init_from: dict | None = None,
                 device: dict | None = None, more=()):
        self.log_report = log_report
        self.more = list(more)
        self.device = device
        self.init_from = init_from
        self.objective = objective
        self.overrides = overrides
        self.held_out = held_out
        self.model = model
        self.samples_per_update = samples_per_update
        self.store = store
        self.to_numpy = to_numpy
        self._first_iteration = None

    def initialize(self, trainer) -> None:
        self._first_iteration = trainer.updater.iteration

    def finalize(self, trainer) -> None:
        out = Path(trainer.out)
        updater = trainer.updater
        training_time = max(trainer.updating_time, 1e-9)
        samples = (updater.iteration - self._first_iteration) * self.samples_per_update
        summary = {"iteration": updater.iteration, "epoch": updater.epoch_detail,
                   "elapsed_s": self.log_report.elapsed_s, "samples_per_s": samples / training_time,
                   "status": trainer.status, "stop_reason": trainer.stop_reason}
        if self.overrides is not None:
            summary["overrides"] = self.overrides
        if self.init_from is not None:
            summary["init_from"] = self.init_from
        if self.device is not None:
            summary["device"] = self.device
            summary["peak_memory_bytes"] = devices.peak_memory(self.device["device"] != "cpu")
        if self.objective is not None:
            summary["objective"] = self.objective.summary()
        summary.update(updater.readings())
        summary.update(self.log_report.latest())
        if self.held_out is not None and self.held_out.metrics:
            summary.update(self.held_out.metrics)
            summary["test_weights"] = self.held_out.weights
        for fields in self.more:
            summary.update(fields())
        summary.update({"model": self.model} if self.model is not None else {})
        run_summary.write(out, summary)
        arrays = self.store.state_dict(self.to_numpy)
        npz.save(out / run_files.MODEL, arrays, run=out)
