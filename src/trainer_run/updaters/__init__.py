"""Updaters: what one training iteration does (see :mod:`.standard` and :mod:`.parallel`);
:class:`.protocol.Updater` is what the training loop and its extensions use of one. An
updater takes its parts built: its :class:`.batches.Batches`, its :class:`.verdict.Verdict`
and its sync object, which owns what crosses a kvstore (:mod:`.sync`, :mod:`.gradient_sync`,
:mod:`.server_sync`); :mod:`.parts` builds them from plain values. Where a saved state keeps
the main model's parameters is :mod:`trainer_run.runs.checkpoint_tree`'s."""

from .batches import Batches
from .gradient_sync import GradientSync
from .parallel import ParallelUpdater
from .parts import parts_of, updater_of
from .protocol import Updater
from .server_sync import ServerSync
from .standard import StandardUpdater
from .sync import KeyLayout, Sync
from .verdict import Verdict

__all__ = ["Batches", "GradientSync", "KeyLayout", "ParallelUpdater", "ServerSync",
           "StandardUpdater", "Sync", "Updater", "Verdict", "parts_of", "updater_of"]
