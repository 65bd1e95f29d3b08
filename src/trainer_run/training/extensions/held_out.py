"""Held-out evaluation: the test split, evaluated once with the final parameters."""

from __future__ import annotations

from ..extension import PRIORITY_WRITER, Extension


class HeldOutEvaluator(Extension):
    """When training completes, runs ``evaluator`` (over the test split) once and keeps its
    metrics in :attr:`metrics` (``test/<metric>``) for the summary and the metrics table.

    It never runs during training, so validation and every training decision stay blind to
    the test split; a run that is interrupted, diverges or fails is not tested (its resumed
    session is, once it completes).

    A writer: it finalizes before the readers that show its metrics (the summary, the
    metrics table).
    """

    priority = PRIORITY_WRITER
    name = "held_out"

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self.metrics: dict = {}

    def __call__(self, trainer) -> None:
        """Nothing during training."""

    def finalize(self, trainer) -> None:
        if trainer.status == "completed":
            self.metrics = self.evaluator.evaluate()
