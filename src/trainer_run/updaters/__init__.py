"""Updaters: what one training iteration does (see :mod:`.standard` and :mod:`.parallel`);
:class:`.protocol.Updater` is what the training loop and its extensions use of one. What
crosses a kvstore is an updater's sync object's (:mod:`.sync`, :mod:`.gradient_sync`,
:mod:`.server_sync`); where a saved state keeps the main model's parameters is
:mod:`trainer_run.runs.checkpoint_tree`'s."""

from .gradient_sync import GradientSync
from .parallel import ParallelUpdater
from .protocol import Updater
from .server_sync import ServerSync
from .standard import StandardUpdater
from .sync import KeyLayout, Sync

__all__ = ["GradientSync", "KeyLayout", "ParallelUpdater", "ServerSync", "StandardUpdater", "Sync",
           "Updater"]
