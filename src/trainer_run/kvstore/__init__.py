"""Key-value stores with MXNet 1.9's ``kvstore`` interface: ``create(name)`` builds one.

- :mod:`.store`: the key/value semantics every type shares (``init``, ``push``, ``pull``,
  ``pushpull``, ``broadcast``, updating on the store with ``set_optimizer``).
- :mod:`.local`: the in-process types, ``local`` (sums in host memory) and ``device`` (sums on
  the device of the first pushed value).
- :mod:`.dist`: the multi-process types over MPI, imported only when one is created.
- :mod:`.push_compression` and :mod:`.compression`: MXNet's 2-bit gradient compression.
- :mod:`.state_files`: optimizer states as files; :mod:`.placement`: copies between the host
  and devices.
"""

from __future__ import annotations

from ..errors import ConfigError
from .local import DeviceKVStore, LocalKVStore
from .store import KVStore

__all__ = ["DeviceKVStore", "KVStore", "LocalKVStore", "TYPES", "create"]

TYPES = {"local": LocalKVStore, "device": DeviceKVStore}
"""The in-process types, by name."""


DIST_TYPES = ("dist_sync", "dist_device_sync", "dist_async")
"""The multi-process types (:mod:`.dist`, over MPI; imported only when asked for)."""


def create(name: str = "local", **options) -> KVStore:
    """Builds the kvstore type ``name`` (case-insensitive, as in MXNet): ``local``, ``device``,
    or one of :data:`DIST_TYPES`; ``options`` go to the store's constructor (e.g. ``timeout``)."""
    if not isinstance(name, str):
        raise ConfigError(f"kvstore type must be a string, got {name!r}")
    key = name.lower()
    if key in DIST_TYPES:
        from . import dist

        return dist.TYPES[key](**options)
    klass = TYPES.get(key)
    if klass is None:
        raise ConfigError(f"kvstore type {name!r} is unknown; choose one of "
                          f"{', '.join([*TYPES, *DIST_TYPES])}")
    return klass(**options)
