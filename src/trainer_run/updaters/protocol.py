"""What the training loop and its extensions may use of an updater, and nothing more.

The :class:`~trainer_run.training.Trainer` calls ``update()`` each iteration, and before
each ``agree_to_stop(signum)`` (whether a stop signal ends the run there: the processes of
one run decide together); with a time limit, after each update ``agree_to_finish(asked)``
(whether the run ends there as completed, decided together too); ``abort(reason)`` when the
run ends with an exception (so that the other processes stop at once), ``finalize()`` at
the end; ``state_dict`` / ``load_state_dict`` checkpoint it. After each ``update()`` the
Trainer copies ``observation`` (the update's metrics, by bare name: ``loss``) into its own
:attr:`~trainer_run.training.Trainer.observation`, which is what extensions read: no
extension reads the updater's. Extensions call ``settle()`` before they read the run's
state (a log row, an evaluation, a checkpoint), and read ``iteration``, ``epoch_detail``,
``readings()`` (values to show beside the metrics: the loss scale, skipped steps) and
``params_finite()``
(whether every trained parameter is finite, checked before a checkpoint). ``state_dict``
keeps the main model's parameters where :func:`~trainer_run.runs.checkpoint_tree.main_params` finds
them in a run's checkpoint (:mod:`.saved`).
:class:`~trainer_run.updaters.StandardUpdater` and its subclasses implement it.
"""

from __future__ import annotations

from typing import Protocol


class Updater(Protocol):
    """The updater interface of the training loop and its extensions."""

    iteration: int
    observation: dict
    """The last update's metrics by bare name (``loss``); read by the Trainer alone."""

    @property
    def epoch_detail(self) -> float: ...

    def update(self) -> None: ...

    def agree_to_stop(self, signum: int | None) -> int | None:
        """The signal to stop for after this iteration, or None to go on (``signum``: this
        process's stop signal, if any; an updater of one process returns it)."""

    def agree_to_finish(self, asked: bool) -> bool:
        """Whether the run ends after this iteration because a process asked (``asked``: this
        one's wish; an updater of one process returns it)."""

    def abort(self, reason: str) -> None:
        """The run ends with an error: tell the other processes, if any, ``reason``."""

    def finalize(self) -> None: ...

    def readings(self) -> dict: ...

    def settle(self) -> None:
        """Reads the values the updates kept on the device since the last read, and acts on
        them (a non-finite update stops the run here); readers call it before they read the
        run's state, the Trainer when the loop ends."""

    def params_finite(self) -> bool: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
