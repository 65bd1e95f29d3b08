"""Optimizers with MXNet 1.9's registry, constructor arguments and update rules.

``create(name, **kwargs)`` builds a registered optimizer; ``register`` adds a class under
its lower-case name; ``get_updater(optimizer)`` returns MXNet's per-index updater.
"""

from .adam import Adam
from .optimizer import REGISTRY, Optimizer, create, register
from .sgd import SGD
from .updater import IndexUpdater, get_updater

__all__ = ["Adam", "IndexUpdater", "Optimizer", "REGISTRY", "SGD", "create", "get_updater",
           "register"]
