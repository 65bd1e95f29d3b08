"""Registries: the built-in classes of one kind (optimizers, schedulers) by name (MXNet's ``create``).

A registry is a plain dict from name to class, owned by the module of its kind, which wraps
these two functions. :func:`register` files a class under its lower-case class name
(MXNet's rule for optimizers and schedulers) or under a name given; registering another
class under a taken name warns and replaces it (a user's class may override a built-in).
:func:`create` builds the class of a name, case-insensitively, and refuses an unknown one
with the names there are.
"""

from __future__ import annotations

import warnings

from .errors import ConfigError


def register(registry: dict, kind: str, klass: type, name: str | None = None) -> type:
    """Files ``klass`` in ``registry`` under ``name`` (default: its lower-case class name)
    and returns it; ``kind`` (``"optimizer"``, ...) names the registry in the warning."""
    key = name or klass.__name__.lower()
    if key in registry and registry[key] is not klass:
        warnings.warn(f"{kind} {klass.__module__}.{klass.__name__} overrides {key!r}")
    registry[key] = klass
    return klass


def create(registry: dict, kind: str, name: str, **kwargs):
    """An instance of the class ``registry`` holds as ``name`` (case-insensitive), built
    with ``kwargs``; ConfigError listing the names for an unknown one."""
    klass = registry.get(name.lower())
    if klass is None:
        raise ConfigError(f"unknown {kind} {name!r}; choose one of {', '.join(sorted(registry))}")
    return klass(**kwargs)
