"""What an update does with a NaN or infinite loss (Chainer's ``FailOnNonNumber``, on the loss).

Our rule: without dynamic loss scaling a NaN or infinite loss either stops training with
:class:`~trainer_run.errors.Diverged` before the update is applied (``nan_policy="stop"``)
or skips the update (``"skip"``, counted in ``skipped_steps``); ``max_skipped_in_a_row``
skipped updates in a row (None: no limit) stop it as diverged too, since a run that only
skips no longer trains. A NaN or infinite global norm of the gradients (clipping by global
norm computes it, :mod:`.clipping`) is judged the same way. With dynamic loss scaling the
scaler handles non-finite gradients instead (:mod:`trainer_run.loss_scaling`).
"""

from __future__ import annotations

import math

from ..errors import Diverged, check_choice, check_number

NAN_POLICIES = ("stop", "skip")


class NanPolicy:
    """``policy`` (one of :data:`NAN_POLICIES`) on a non-finite loss, and the count of
    skipped updates; see the module docstring."""

    def __init__(self, policy: str = "stop", max_skipped_in_a_row: int | None = 100):
        self.policy = check_choice("nan_policy", policy, NAN_POLICIES)
        self.max_skipped_in_a_row = max_skipped_in_a_row if max_skipped_in_a_row is None else \
            check_number("max_skipped_in_a_row", max_skipped_in_a_row, low=1, integer=True)
        self.skipped_steps = 0
        self.skipped_in_a_row = 0

    def verdict(self, loss: float, iteration: int, what: str = "training loss") -> str:
        """``"apply"`` for a finite ``loss`` (of the update at ``iteration``; ``what``: the
        value's name in a message, e.g. ``gradients' global norm``); else ``"skip"`` or
        :class:`~trainer_run.errors.Diverged`."""
        if math.isfinite(loss):
            self.skipped_in_a_row = 0
            return "apply"
        if self.policy == "skip":
            self.skipped_steps += 1
            self.skipped_in_a_row += 1
            if self.skipped_in_a_row == self.max_skipped_in_a_row:
                raise Diverged(f"the {what} was NaN or infinite in each of the last "
                               f"{self.skipped_in_a_row} updates, up to iteration {iteration + 1}, "
                               f"and all were skipped (updater.max_skipped_in_a_row). Lower "
                               "optimizer.learning_rate or set optimizer.clip_gradient")
            return "skip"
        raise Diverged(f"the {what} is {loss} at iteration {iteration + 1}; the update was "
                       "not applied. Lower optimizer.learning_rate, set optimizer.clip_gradient, or "
                       "choose updater.nan_policy=skip")

    def state_dict(self) -> dict:
        return {"skipped_steps": self.skipped_steps, "skipped_in_a_row": self.skipped_in_a_row}

    def load_state_dict(self, state: dict) -> None:
        """Restores the counts (0 where a state has none)."""
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.skipped_in_a_row = int(state.get("skipped_in_a_row", 0))
