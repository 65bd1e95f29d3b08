"""What the training loop and its extensions may use of an updater, and nothing more.

The :class:`~trainer_run.training.Trainer` calls ``update()`` each iteration and
``finalize()`` at the end; ``state_dict`` / ``load_state_dict`` checkpoint it. Extensions
read ``iteration``, ``epoch_detail``, ``observation`` (the last update's metrics),
``status()`` (values to show beside them: the loss scale, skipped steps) and
``params_finite()`` (whether every trained parameter is finite, checked before a
checkpoint). :class:`~trainer_run.updaters.StandardUpdater` and its subclasses implement it.
"""

from __future__ import annotations

from typing import Protocol


class Updater(Protocol):
    """The updater interface of the training loop and its extensions."""

    iteration: int
    observation: dict

    @property
    def epoch_detail(self) -> float: ...

    def update(self) -> None: ...

    def finalize(self) -> None: ...

    def status(self) -> dict: ...

    def params_finite(self) -> bool: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
