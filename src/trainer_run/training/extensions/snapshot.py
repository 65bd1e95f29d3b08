"""Snapshot: writes the full training state as a checkpoint (see :mod:`trainer_run.checkpoint`)."""

from __future__ import annotations

from pathlib import Path

from ... import checkpoint

PRIORITY = -100


class Snapshot:
    """On its trigger, and once more when training ends or is interrupted, saves
    ``trainer.state_dict()`` plus ``extra`` (e.g. the run's config) under
    ``<out>/checkpoints``, keeping the newest ``keep`` checkpoints (None: all)."""

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
        state = {**self.extra, "trainer": trainer.state_dict()}
        iteration = trainer.updater.iteration
        path = checkpoint.save(state, Path(trainer.out) / "checkpoints", iteration, self.keep)
        self._saved_at = iteration
        return path

    def finalize(self, trainer) -> None:
        if trainer.status in ("completed", "interrupted") and self._saved_at != trainer.updater.iteration:
            self.save(trainer)
