"""Snapshot: writes the full training state as a checkpoint (see :mod:`trainer_run.storage.checkpoint`)."""

from __future__ import annotations

from pathlib import Path

from trainer_run.storage import run_files

from ...errors import Diverged
from ...storage import checkpoint, npz
from ...storage.background_write import BackgroundWrite, frozen
from ..extension import PRIORITY_READER, Extension


class Snapshot(Extension):
    """On its trigger, and once more when training ends or is interrupted, saves
    ``trainer.state_dict()`` plus ``extra`` (e.g. the run's config) under
    ``<out>/checkpoints``, keeping the newest ``keep`` checkpoints (None: all). The state is
    taken (its arrays copied) at the iteration; the files are written on a background thread
    (:mod:`trainer_run.storage.background_write`) while training goes on, one write at a time, and
    the end of training waits for the last one.

    A state whose parameters hold NaN or inf is never saved: the run stops with
    :class:`~trainer_run.errors.Diverged` and the previous checkpoint stays the last one.

    With ``objective`` (an :class:`~.objective.Objective`), it also saves at each evaluation
    that enters the objective's best ``keep``, and retention never deletes those checkpoints;
    when the saved one is the best so far, ``checkpoints/best`` names it and ``model_best.npz``
    (written like ``model.npz``, from ``params()``: arrays by name) holds its parameters,
    which :attr:`best` keeps in memory for the rest of the session. Its trigger must then
    include ``objective.entered``.

    A reader registered after the :class:`~.log_report.LogReport` (a checkpoint holds the log
    up to its own iteration) and before the :class:`~.summary.Summary` (whose status counts a
    failed last write); the objective, an editor, has ranked the iteration before it."""

    priority = PRIORITY_READER
    name = "snapshot"

    def __init__(self, keep: int | None = None, extra: dict | None = None, objective=None,
                 params=None):
        self.keep = keep
        self.extra = extra or {}
        self.objective = objective
        self.params = params
        self._saved_at = None
        self._writer = BackgroundWrite()
        self.best: tuple | None = None
        """``(iteration, arrays)`` of the best checkpoint saved in this session, or None."""

    def initialize(self, trainer) -> None:
        """A resumed run starts from a checkpoint of its current iteration."""
        if trainer.updater.iteration > 0:
            self._saved_at = trainer.updater.iteration

    def __call__(self, trainer) -> None:
        self.save(trainer)

    def save(self, trainer) -> Path:
        """Saves the state of this iteration: the state (arrays copied) is taken here, the
        writing goes on in the background while training continues (one write at a time; a
        failed write raises at the next save or when training ends). Returns the path the
        checkpoint will have."""
        iteration = trainer.updater.iteration
        trainer.updater.settle()
        if not trainer.updater.params_finite():
            raise Diverged(f"the parameters hold NaN or inf at iteration {iteration}; "
                           "no checkpoint was written for it")
        state = frozen({**self.extra, "trainer": trainer.state_dict()})
        directory = Path(trainer.out) / run_files.CHECKPOINTS
        best = self.objective.kept_iterations if self.objective is not None else []
        arrays = self.params() if self.params is not None and best and best[0] == iteration else None
        if arrays is not None:
            self.best = (iteration, arrays)
        self._writer.submit(lambda: self._write(state, directory, iteration, best, arrays))
        self._saved_at = iteration
        return directory / checkpoint.name_of(iteration)

    def _write(self, state: dict, directory: Path, iteration: int, best: list, arrays) -> None:
        checkpoint.save(state, directory, iteration, self.keep,
                        protect=[checkpoint.name_of(i) for i in best], run=directory.parent)
        if best and best[0] == iteration:
            checkpoint.mark_best(directory, iteration, run=directory.parent)
            if arrays is not None:
                npz.save(directory.parent / run_files.BEST_MODEL, arrays, run=directory.parent)

    def finalize(self, trainer) -> None:
        """Saves the last iteration (unless just saved) when training completed or was
        interrupted, and waits for the writing either way."""
        try:
            if trainer.status in ("completed", "interrupted") and \
                    self._saved_at != trainer.updater.iteration:
                self.save(trainer)
        finally:
            self._writer.wait()
