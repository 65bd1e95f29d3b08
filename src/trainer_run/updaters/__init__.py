"""Updaters: what one training iteration does (see :mod:`.standard` and :mod:`.parallel`)."""

from .parallel import ParallelUpdater
from .standard import StandardUpdater

__all__ = ["ParallelUpdater", "StandardUpdater"]
