"""Snapshot: writes the full training state as a checkpoint (see :mod:`trainer_run.checkpoint`)."""

from __future__ import annotations

from pathlib import Path

import numpy

from ... import checkpoint, files
from ...errors import Diverged
from ..extension import Extension

PRIORITY = -100


class Snapshot(Extension):
    """On its trigger, and once more when training ends or is interrupted, saves
    ``trainer.state_dict()`` plus ``extra`` (e.g. the run's config) under
    ``<out>/checkpoints``, keeping the newest ``keep`` checkpoints (None: all).

    A state whose parameters hold NaN or inf is never saved: the run stops with
    :class:`~trainer_run.errors.Diverged` and the previous checkpoint stays the last one.

    With ``objective`` (an :class:`~.objective.Objective`), it also saves at each evaluation
    that enters the objective's best ``keep``, and retention never deletes those checkpoints;
    when the saved one is the best so far, ``checkpoints/best`` names it and ``model_best.npz``
    (written like ``model.npz``, from ``params()``: arrays by name) holds its parameters. Its
    trigger must then include ``objective.entered``."""

    priority = PRIORITY
    name = "snapshot"

    def __init__(self, keep: int | None = None, extra: dict | None = None, objective=None,
                 params=None):
        self.keep = keep
        self.extra = extra or {}
        self.objective = objective
        self.params = params
        self._saved_at = None

    def initialize(self, trainer) -> None:
        """A resumed run starts from a checkpoint of its current iteration."""
        if trainer.updater.iteration > 0:
            self._saved_at = trainer.updater.iteration

    def __call__(self, trainer) -> None:
        self.save(trainer)

    def save(self, trainer) -> Path:
        iteration = trainer.updater.iteration
        if not trainer.updater.params_finite():
            raise Diverged(f"the parameters hold NaN or inf at iteration {iteration}; "
                           "no checkpoint was written for it")
        state = {**self.extra, "trainer": trainer.state_dict()}
        directory = Path(trainer.out) / "checkpoints"
        best = self.objective.kept_iterations if self.objective is not None else []
        path = checkpoint.save(state, directory, iteration, self.keep,
                               protect=[checkpoint.name_of(i) for i in best])
        self._saved_at = iteration
        if best and best[0] == iteration:
            checkpoint.mark_best(directory, iteration)
            if self.params is not None:
                arrays = self.params()
                files.write_atomic(Path(trainer.out) / "model_best.npz",
                                   lambda f: numpy.savez(f, **arrays))
        return path

    def finalize(self, trainer) -> None:
        if trainer.status in ("completed", "interrupted") and self._saved_at != trainer.updater.iteration:
            self.save(trainer)
