"""Updaters: what one training iteration does (see :mod:`.standard` and :mod:`.parallel`);
:class:`.protocol.Updater` is what the training loop and its extensions use of one."""

from .parallel import ParallelUpdater
from .protocol import Updater
from .standard import StandardUpdater

__all__ = ["ParallelUpdater", "StandardUpdater", "Updater"]
