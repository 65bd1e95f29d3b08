"""Which kvstore the trainer uses, and whether the optimizer runs on it: MXNet 1.9's rules.

:func:`decide` is MXNet 1.9's ``model._create_kvstore`` followed by the dense branch of
Gluon's ``Trainer._init_kvstore``, as a pure function of the config. ``update_on_kvstore``
means the trainer calls ``kv.set_optimizer(optimizer)`` and pushes gradients, the store updates
the weights and the trainer pulls them back; otherwise the store only sums gradients and every
replica's updater applies the optimizer.

=====================================  =======  ===================  ==========================
``kvstore``                            devices  update_on_kvstore    result: (store, on store)
=====================================  =======  ===================  ==========================
``none`` (None)                        any      any (ignored)        (None, False)
``local``, ``device``                  1        any (ignored)        (None, False)
``local``, ``device``                  >= 2     unset                (type, ENV)
``local``, largest array > 16 Mi       >= 2     unset                (type, False)
``local``, ``device``                  >= 2     true / false         (type, as given)
``dist_sync``, ``dist_device_sync``    any      unset                (type, ENV)
``dist_sync``, ``dist_device_sync``    any      true / false         (type, as given)
``dist_async``                         any      unset / true         (type, True)
``dist_async``                         any      false                ConfigError
=====================================  =======  ===================  ==========================

- ENV is ``bool(int(MXNET_UPDATE_ON_KVSTORE))``, 1 when unset. Like MXNet, the variable is
  parsed on every call, so a value that is not an integer is an error even where it is ignored.
- "16 Mi" is MXNet's ``1024 * 1024 * 16`` elements, tested on the largest parameter with the
  type spelled ``local`` only (it then prefers summing on the store and updating per replica).
- A ``dist_*`` type makes a store whatever the number of devices or workers: MXNet tests the
  type's name, never the number of workers.
- Without a store the trainer updates locally, whatever ``update_on_kvstore`` says (MXNet
  1.9's Trainer then stores ``None``; its later ``is_capable`` check would fail on the missing
  store when ``update_on_kvstore=True``, a crash we do not reproduce).

Errors (:class:`~trainer_run.errors.ConfigError`, MXNet's wording with our config keys):
``kvstore.update_on_kvstore=false`` with ``dist_async`` ("Please set update_on_kvstore=True when
training in async mode"); a ``kvstore`` that is not a string or None ("kvstore must be
KVStore, str or None"); an unknown type; an ``update_on_kvstore`` that is not a bool or None; a
device count below 1; ``MXNET_UPDATE_ON_KVSTORE`` not an integer.

MXNet's other rules do not apply here: the sparse-weight and sparse-gradient branches (every
array here is dense); ``update_on_kvstore &= kv.is_capable('optimizer')`` and its error "Please
set update_on_kvstore=False when training with ..." (every store here accepts an optimizer;
only Horovod, BytePS and P3 stores do not); the ``optimizer.aggregate_num > 1`` rule (MXNet 2.0's
Trainer, not 1.9's); and the "``optimizer.lr_scheduler`` is not None" item of the Trainer's
docstring, which no 1.9 code enforces. The optimizer therefore plays no part in the decision.
Type names are compared in lower case, as :func:`trainer_run.kvstore.create` does (MXNet's
``'dist' in kvstore`` and ``kvstore == 'local'`` tests are case-sensitive).
"""

from __future__ import annotations

import os
from typing import Mapping, NamedTuple

from ..errors import ConfigError
from . import NONE, TYPES

__all__ = ["BIG_ARRAY", "Decision", "TYPES", "decide"]

BIG_ARRAY = 1024 * 1024 * 16
"""Elements above which a ``local`` store defaults to updating per replica (MXNet's limit)."""

ENV = "MXNET_UPDATE_ON_KVSTORE"


class Decision(NamedTuple):
    kvstore: str | None
    """The type to create, or None for no kvstore."""
    update_on_kvstore: bool
    """Whether to ``set_optimizer`` on the store (always False without one)."""

    @property
    def asynchronous(self) -> bool:
        """Whether the store's server applies the optimizer to each worker's push as it
        arrives (``dist_async``, always with ``update_on_kvstore``): the trainer then pushes
        gradients and pulls weights. With the synchronous types ``update_on_kvstore`` does
        not change the numbers (every worker computes the update from the same summed
        gradient), so the trainer has the store sum the gradients and applies the optimizer
        in every process whatever it says."""
        return self.kvstore is not None and "async" in self.kvstore


def decide(kvstore: str | None, update_on_kvstore: bool | None = None, *, num_devices: int = 1,
           max_param_size: int = 0, environ: Mapping[str, str] | None = None) -> Decision:
    """The trainer's kvstore and ``update_on_kvstore`` for dense training (module docstring).

    Args:
        kvstore: ``none`` / None or one of :data:`trainer_run.kvstore.TYPES` (config
            ``kvstore.type``).
        update_on_kvstore: config ``kvstore.update_on_kvstore``; None lets the rules choose.
        num_devices: replicas in this process (MXNet's number of contexts).
        max_param_size: elements of the largest parameter.
        environ: where ``MXNET_UPDATE_ON_KVSTORE`` is read (default ``os.environ``).
    """
    default = _env_default(os.environ if environ is None else environ)
    if update_on_kvstore is not None and not isinstance(update_on_kvstore, bool):
        raise ConfigError(f"kvstore.update_on_kvstore must be true, false or null (let the "
                          f"trainer choose), got {update_on_kvstore!r}")
    if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
        raise ConfigError(f"the number of devices must be an integer >= 1, got {num_devices!r}")
    if kvstore is not None and not isinstance(kvstore, str):
        raise ConfigError(f"kvstore must be KVStore, str or None, got {kvstore!r}; choose "
                          f"{NONE} or one of {', '.join(TYPES)}")
    name = None if kvstore is None or kvstore.lower() == NONE else kvstore.lower()
    if name is not None and name not in TYPES:
        raise ConfigError(f"kvstore={kvstore!r} is unknown; choose {NONE} or one of {', '.join(TYPES)}")
    # model._create_kvstore
    if name is None or (num_devices == 1 and "dist" not in name):
        return Decision(None, False)  # no store for one device on one machine
    if name == "local" and max_param_size > BIG_ARRAY:
        default = False
    # Trainer._init_kvstore, dense weights and gradients
    if "async" in name:
        if update_on_kvstore is False:
            raise ConfigError("Please set kvstore.update_on_kvstore=true (or leave it unset) when "
                              "training in async mode: with kvstore=dist_async the servers own "
                              "the weights and apply the optimizer")
        return Decision(name, True)
    return Decision(name, default if update_on_kvstore is None else update_on_kvstore)


def _env_default(environ: Mapping[str, str]) -> bool:
    """``bool(int(os.getenv('MXNET_UPDATE_ON_KVSTORE', '1')))``, with a clear error."""
    raw = environ.get(ENV, "1")
    try:
        return bool(int(raw))
    except ValueError:
        raise ConfigError(f"environment variable {ENV}={raw!r} must be an integer: 1 (update "
                          f"on the kvstore) or 0 (update on each device)") from None
