"""What the training loop, its extensions and the run's lifecycle may use of an updater, and
nothing more.

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
``params_finite()`` (whether every trained parameter is finite, checked before a
checkpoint); an epoch trigger reads ``previous_epoch_detail`` too. Weight averages and the
checkpoint read the main model's parameters through :func:`main_store`, and the
exponential average reads ``kept`` after each update. The run's lifecycle reads ``rank``,
the model it shows (``get_model('main')``) and, after a resume, ``workers_change()``.
``state_dict`` keeps the main model's parameters where
:func:`~trainer_run.runs.checkpoint_tree.main_params` finds them in a run's checkpoint
(:mod:`.saved`). :class:`~trainer_run.updaters.StandardUpdater` and its subclasses
implement it. Nothing outside the updaters reads any other member of an updater
(tests/updaters/test_protocol.py holds the readers to this list).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..params import ParamStore

__all__ = ["Updater", "main_store"]


class Updater(Protocol):
    """The updater interface of the training loop, its extensions and the lifecycle."""

    iteration: int
    observation: dict
    """The last update's metrics by bare name (``loss``); read by the Trainer alone."""
    rank: int
    """This process's rank among the run's worker processes (0 of 1 without a dist kvstore)."""
    kept: object
    """Whether the last update's optimizer step was kept: a bool, or a 0-d boolean array on
    the device when the verdict is the device's; False for a skipped step."""
    stores: dict
    """The models' parameter stores by name; readers take the main model's through
    :func:`main_store`."""

    @property
    def epoch_detail(self) -> float: ...

    @property
    def previous_epoch_detail(self) -> float | None:
        """The main iterator's epoch detail before its last batch (None before the first)."""

    def get_model(self, name: str = "main"):
        """The model of that name (``'main'``: the one the run trains)."""

    def workers_change(self) -> str | None:
        """After ``load_state_dict``: what resuming with another number of worker processes
        than the saved state's changes, in one sentence; None when nothing does."""

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


def main_store(updater: Updater) -> ParamStore:
    """The main model's parameter store of ``updater`` (its parameters and persistent values):
    what a weight average reads and swaps in, and what a checkpoint's ``params`` are."""
    return updater.stores["main"]
