"""Key-value stores with MXNet 1.9's ``kvstore`` interface: ``create(name)`` builds one.

- :mod:`.store`: the key/value semantics every type shares (``init``, ``push``, ``pull``,
  ``pushpull``, ``broadcast``, updating on the store with ``set_optimizer``).
- :mod:`.local`: the in-process types, ``local`` (sums in host memory) and ``device`` (sums on
  the device of the first pushed value).
- :mod:`.dist`: the multi-process types over MPI, imported only when one is created.
- :mod:`.push_compression` and :mod:`.compression`: MXNet's 2-bit gradient compression.
- :mod:`.state_files`: optimizer states as files; :mod:`.placement`: copies between the host
  and devices.
- :mod:`.trainer_rules`: which store a trainer uses (MXNet's rules); :mod:`.request`: a
  trainer's kvstore settings (the config's ``kvstore`` section) through those rules to a store.

The type names live here, and only here: :data:`LOCAL_TYPES`, :data:`DIST_TYPES` and
:data:`NONE` (MXNet's types are strings by design, ``mx.kv.create('device')``); the rules, the
dist module and the command line read them from this module. Each store class reports its own
as ``type`` (MXNet's ``kv.type``).
"""

from __future__ import annotations

from ..errors import ConfigError
from .local import DeviceKVStore, LocalKVStore
from .store import KVStore

__all__ = ["DIST_TYPES", "DeviceKVStore", "KVStore", "LOCAL_TYPES", "LocalKVStore", "NONE", "TYPES",
           "create", "is_dist"]

LOCAL_TYPES = ("local", "device")
"""The in-process types (:mod:`.local`)."""
DIST_TYPES = ("dist_sync", "dist_device_sync", "dist_async")
"""The multi-process types (:mod:`.dist`, over MPI; imported only when asked for)."""
TYPES = (*LOCAL_TYPES, *DIST_TYPES)
"""Every type :func:`create` builds, in MXNet's spelling."""
NONE = "none"
"""A trainer's "no kvstore" (MXNet's ``kvstore=None``): gradients stay where they were computed."""


def is_dist(name) -> bool:
    """Whether ``name`` is one of :data:`DIST_TYPES` (case-insensitive, as :func:`create`)."""
    return isinstance(name, str) and name.lower() in DIST_TYPES


def create(name: str = "local", **options) -> KVStore:
    """Builds the kvstore type ``name`` (case-insensitive, as in MXNet): one of :data:`TYPES`;
    ``options`` go to the store's constructor (e.g. ``timeout``)."""
    if not isinstance(name, str):
        raise ConfigError(f"kvstore type must be a string, got {name!r}")
    key = name.lower()
    if key not in TYPES:
        raise ConfigError(f"kvstore type {name!r} is unknown; choose one of {', '.join(TYPES)}")
    if is_dist(key):
        from . import dist

        return dist.TYPES[key](**options)
    return {store.type: store for store in (LocalKVStore, DeviceKVStore)}[key](**options)

