"""LogReport: averages observations between log points and appends them to ``metrics.jsonl``."""

from __future__ import annotations

from pathlib import Path

from ... import files, strict_json
from ..extension import PRIORITY_READER, Extension

FILE = "metrics.jsonl"


class LogReport(Extension):
    """Every iteration accumulates the trainer's observation; when ``log_trigger`` fires it
    writes one JSON object: ``iteration``, ``epoch`` (epoch_detail), ``elapsed_s``, ``lr``,
    the updater's current ``status()`` values as they are (``loss_scale``,
    ``skipped_steps`` under dynamic loss scaling), and the mean of each observed metric
    since the previous log point (``train/<name>`` for the updater's, validation keys as
    the evaluator reported them).

    The rows logged so far and the running sums are part of the state, so a resumed run
    rewrites ``metrics.jsonl`` (atomically) up to its checkpoint and continues it identically.
    Rows are strict JSON: a NaN or infinite value is written as ``null`` (the state keeps
    it). A refused write raises :class:`~trainer_run.errors.StorageError` naming the file.
    """

    priority = PRIORITY_READER
    name = "log_report"

    def __init__(self, log_trigger, optimizer=None, filename: str = FILE):
        self.log_trigger = log_trigger
        self.optimizer = optimizer
        self.filename = filename
        self.log: list[dict] = []
        self._sums: dict = {}
        self._counts: dict = {}
        self._path: Path | None = None

    def initialize(self, trainer) -> None:
        self._path = Path(trainer.out) / self.filename
        files.write_atomic(self._path, "".join(strict_json.dumps(row) + "\n" for row in self.log))

    def __call__(self, trainer) -> None:
        for key, value in trainer.observation.items():
            name = key if "/" in key else f"train/{key}"
            self._sums[name] = self._sums.get(name, 0.0) + value
            self._counts[name] = self._counts.get(name, 0) + 1
        if self.log_trigger(trainer):
            self._write(trainer)

    def _write(self, trainer) -> None:
        updater = trainer.updater
        row = {"iteration": updater.iteration, "epoch": updater.epoch_detail,
               "elapsed_s": trainer.elapsed_time}
        if self.optimizer is not None:
            row["lr"] = self.optimizer.learning_rate
        row.update(updater.status())
        for name in sorted(self._sums):
            row[name] = float(self._sums[name]) / self._counts[name]
        self._sums, self._counts = {}, {}
        self.log.append(row)
        files.append(self._path, strict_json.dumps(row) + "\n")

    @property
    def last(self) -> dict:
        return self.log[-1] if self.log else {}

    def state_dict(self) -> dict:
        return {"log": self.log, "sums": {k: float(v) for k, v in self._sums.items()},
                "counts": self._counts}

    def load_state_dict(self, state: dict) -> None:
        self.log = list(state["log"])
        self._sums = dict(state["sums"])
        self._counts = dict(state["counts"])
