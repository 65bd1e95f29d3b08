"""A trainer's kvstore settings, and the store MXNet's rules make of them for a run.

MXNet's Gluon ``Trainer`` takes ``kvstore`` (a type name), ``update_on_kvstore`` and
``compression_params``; whether a store exists at all depends on the run ("one replica in one
process uses no kvstore", :mod:`.trainer_rules`). :class:`KVStoreRequest` holds those settings
(plus the dist stores' ``timeout``), checked when it is built; :meth:`KVStoreRequest.decide`
applies the rules for the run's replicas and :meth:`KVStoreRequest.create` builds the store the
decision names. The config's ``kvstore`` options name it with ``_target_``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError, check, check_number
from . import DIST_TYPES, NONE, TYPES, create, trainer_rules
from . import compression as compressions
from .mpi import DEFAULT_TIMEOUT

__all__ = ["KVStoreRequest"]


class KVStoreRequest:
    """The kvstore a trainer asks for; see the module docstring.

    Args:
        type: ``none`` or one of :data:`trainer_run.kvstore.TYPES` (case-insensitive).
        update_on_kvstore: True, False, or None to let MXNet's rules choose
            (:func:`.trainer_rules.decide` checks it).
        compression: ``{"type": "2bit" or None, "threshold": t}`` (MXNet's
            ``compression_params``; a null type, or None, compresses nothing).
        timeout: seconds a dist store waits for the other ranks (> 0); the in-process types
            do not wait.

    Errors name the argument (``compression.type='1bit' is unknown; ...``).
    """

    def __init__(self, type: str = NONE, update_on_kvstore: bool | None = None,
                 compression: Mapping | None = None, timeout: float = DEFAULT_TIMEOUT):
        check(isinstance(type, str) and type.lower() in (NONE, *TYPES),
              f"type={type!r} is unknown; choose {NONE} or one of {', '.join(TYPES)}")
        self.type = None if type.lower() == NONE else type.lower()
        """The store's type, None for none."""
        self.update_on_kvstore = update_on_kvstore
        self.compression = _compression(compression)
        """MXNet's ``compression_params`` with the threshold filled in, or None."""
        self.timeout = check_number("timeout", timeout, low=0, low_open=True)

    def __repr__(self) -> str:
        return (f"KVStoreRequest(type={self.type or NONE!r}, update_on_kvstore="
                f"{self.update_on_kvstore!r}, compression={self.compression!r})")

    def decide(self, num_devices: int = 1, max_param_size: int = 0,
               environ: Mapping[str, str] | None = None) -> trainer_rules.Decision:
        """MXNet's decision for ``num_devices`` replicas in this process (see
        :func:`.trainer_rules.decide`, whose errors name the config's keys)."""
        return trainer_rules.decide(self.type, self.update_on_kvstore, num_devices=num_devices,
                                    max_param_size=max_param_size, environ=environ)

    def create(self, decision: trainer_rules.Decision):
        """The store ``decision`` names (None for none), a dist one waiting ``timeout``; it
        compresses its pushes when :attr:`compression` is set (a ``dist_async`` server learns
        the threshold from the workers' pushes, so it is not told)."""
        if decision.kvstore is None:
            return None
        options = {"timeout": self.timeout} if decision.kvstore in DIST_TYPES else {}
        store = create(decision.kvstore, **options)
        if self.compression is not None and not getattr(store, "is_server", False):
            store.set_gradient_compression(self.compression)
        return store


def _compression(settings: Mapping | None) -> dict | None:
    """``settings`` (type and threshold) as MXNet's ``compression_params``, None for no type."""
    settings = settings or {}
    unknown = sorted(map(str, set(settings) - {"type", "threshold"}))
    if unknown:
        raise ConfigError(f"compression.{unknown[0]} is not a setting of gradient compression; "
                          "they are type and threshold")
    kind = settings.get("type")
    if kind is None:
        return None
    check(kind in compressions.TYPES, f"compression.type={kind!r} is unknown; choose "
          f"{', '.join(compressions.TYPES)} (MXNet 1.9's 2-bit gradient compression) or null (none)")
    params = {"type": kind, "threshold": settings.get("threshold", compressions.DEFAULT_THRESHOLD)}
    try:
        return compressions.GradientCompression(params).params
    except ConfigError as e:  # its messages start with the setting's name
        raise ConfigError(f"compression.{e}") from None
