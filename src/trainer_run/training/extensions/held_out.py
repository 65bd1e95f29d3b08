"""Held-out evaluation: the test split, evaluated once, with the best evaluation's weights."""

from __future__ import annotations

from ..extension import PRIORITY_WRITER, Extension


class HeldOutEvaluator(Extension):
    """When training completes, runs ``evaluator`` (over the test split) once and keeps its
    metrics in :attr:`metrics` (``test/<metric>``) for the summary and the metrics table, and
    in :attr:`weights` which weights it tested: ``{"checkpoint": "best" | "last",
    "iteration": N}``.

    With ``best`` (a function returning the best evaluation's ``(iteration, arrays)`` by the
    run's objective, or None when there is none), the test uses those weights, as
    Lightning's ``trainer.test(ckpt_path="best")``: they are copied into ``store`` (the main
    model's :class:`~trainer_run.params.ParamStore`; ``asarray`` puts them on its device)
    for the evaluation and the final ones put back after it, so the checkpoint and
    ``model.npz`` written after keep the final weights (the best weights of the last
    iteration too: they are the EMA's when the objective ranks the EMA weights, and then
    ``averaged``, ``"ema"``, is in :attr:`weights` too: ``{"checkpoint": "best", "iteration":
    N, "averaged": "ema"}``). Without a best, the final weights are tested.

    It never runs during training, so validation and every training decision stay blind to
    the test split; a run that is interrupted, diverges or fails is not tested (its resumed
    session is, once it completes).

    A writer: it finalizes before the readers that show its metrics (the summary, the
    metrics table).
    """

    priority = PRIORITY_WRITER
    name = "held_out"

    def __init__(self, evaluator, best=None, store=None, backend=None, averaged: str | None = None):
        self.evaluator = evaluator
        self.averaged = averaged
        self.best = best
        self.store = store
        self.backend = backend
        self.metrics: dict = {}
        self.weights: dict = {}

    def __call__(self, trainer) -> None:
        """Nothing during training."""

    def finalize(self, trainer) -> None:
        if trainer.status != "completed":
            return
        iteration = trainer.updater.iteration
        chosen = self.best() if self.best is not None else None
        if chosen is None:
            self.metrics = self.evaluator.evaluate()
            self.weights = {"checkpoint": "last", "iteration": iteration}
            return
        final = self.store.state_dict(self.backend.to_numpy)
        self.store.load_state_dict(chosen[1], self.backend.asarray)
        try:
            self.metrics = self.evaluator.evaluate()
        finally:
            self.store.load_state_dict(final, self.backend.asarray)
        self.weights = {"checkpoint": "best", "iteration": chosen[0],
                        **({"averaged": self.averaged} if self.averaged else {})}
