"""Summary: at the end of a run, ``summary.json`` and the final parameters in ``model.npz``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy

PRIORITY = -200


class Summary:
    """Writes ``summary.json`` (``iteration``, ``epoch``, ``elapsed_s``, ``samples_per_s``,
    ``status`` and the last logged ``train/*`` and ``val/*`` metrics) and ``model.npz``
    (parameters by path, loadable with ``numpy.load``) when training ends, however it ends.

    ``samples_per_s`` counts the samples of this session's iterations over its wall time.
    """

    priority = PRIORITY
    name = "summary"
    trigger = (1, "iteration")

    def __init__(self, log_report, samples_per_update: int, store, to_numpy=numpy.asarray):
        self.log_report = log_report
        self.samples_per_update = samples_per_update
        self.store = store
        self.to_numpy = to_numpy
        self._first_iteration = None
        self._first_elapsed = None

    def initialize(self, trainer) -> None:
        self._first_iteration = trainer.updater.iteration
        self._first_elapsed = trainer.elapsed_time

    def __call__(self, trainer) -> None:
        pass

    def finalize(self, trainer) -> None:
        out = Path(trainer.out)
        updater = trainer.updater
        elapsed = trainer.elapsed_time
        session_time = max(elapsed - self._first_elapsed, 1e-9)
        samples = (updater.iteration - self._first_iteration) * self.samples_per_update
        summary = {"iteration": updater.iteration, "epoch": updater.epoch_detail,
                   "elapsed_s": elapsed, "samples_per_s": samples / session_time,
                   "status": trainer.status}
        summary.update({k: v for k, v in self.log_report.last.items()
                        if k.startswith(("train/", "val/"))})
        _write_atomic(out / "summary.json", lambda f: f.write(json.dumps(summary, indent=2)), "w")
        arrays = self.store.state_dict(self.to_numpy)
        _write_atomic(out / "model.npz", lambda f: numpy.savez(f, **arrays), "wb")


def _write_atomic(path: Path, write, mode: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, mode) as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
