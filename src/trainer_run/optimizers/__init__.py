"""Optimizers with MXNet 1.9's registry, constructor arguments and update rules.

``create(name, **kwargs)`` builds a registered optimizer; ``register`` adds a class under
its lower-case name; ``get_updater(optimizer)`` returns MXNet's per-index updater.

Every module of this package is imported here, so an optimizer is added by writing one
module with one ``@register``-ed class (and one ``configs/optimizer/<name>.yaml``); its
class is then available as ``trainer_run.optimizers.<ClassName>``.
"""

import importlib
import pkgutil

from .applier import GroupApplier, IndexApplier, get_updater
from .optimizer import REGISTRY, Optimizer, create, learning_rate_of, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
globals().update({klass.__name__: klass for klass in REGISTRY.values()})

__all__ = ["GroupApplier", "IndexApplier", "Optimizer", "REGISTRY", "create", "get_updater",
           "learning_rate_of", "register",
           *sorted(klass.__name__ for klass in REGISTRY.values())]
