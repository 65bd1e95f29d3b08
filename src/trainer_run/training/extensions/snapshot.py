"""Snapshot: writes the full training state as a checkpoint (see :mod:`trainer_run.checkpoint`)."""

from __future__ import annotations

from pathlib import Path

from ... import checkpoint
from ...errors import Diverged
from ..extension import Extension

PRIORITY = -100


class Snapshot(Extension):
    """On its trigger, and once more when training ends or is interrupted, saves
    ``trainer.state_dict()`` plus ``extra`` (e.g. the run's config) under
    ``<out>/checkpoints``, keeping the newest ``keep`` checkpoints (None: all).

    A state whose parameters hold NaN or inf is never saved: the run stops with
    :class:`~trainer_run.errors.Diverged` and the previous checkpoint stays the last one."""

    priority = PRIORITY
    name = "snapshot"

    def __init__(self, keep: int | None = None, extra: dict | None = None):
        self.keep = keep
        self.extra = extra or {}
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
        path = checkpoint.save(state, Path(trainer.out) / "checkpoints", iteration, self.keep)
        self._saved_at = iteration
        return path

    def finalize(self, trainer) -> None:
        if trainer.status in ("completed", "interrupted") and self._saved_at != trainer.updater.iteration:
            self.save(trainer)
