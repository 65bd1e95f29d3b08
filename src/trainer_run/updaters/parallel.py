"""ParallelUpdater: data-parallel replicas of one model in one process (Chainer semantics).

The main model stays where it is; ``devices`` more copies are made (CPU replicas run in
threads on NumPy, one replica per GPU id on CuPy). Each batch is split Chainer's way
(example ``j`` to replica ``j % n``), every replica runs forward and backward on its part,
the gradients are summed onto the main replica through a kvstore (``local``: in host
memory; ``device``: on the device of the main replica, as MXNet's Trainer does), the main
optimizer makes one update, and the parameters are copied back to the other replicas.

How the replicas' gradients combine (``grad_reduce``, :data:`GRAD_REDUCE`):

- ``"mean"`` (our rule, the default): each replica's backward is weighted by its share of the
  batch, so the update equals :class:`~trainer_run.updaters.StandardUpdater`'s on the whole
  batch, to float32 rounding.
- ``"sum"`` (Chainer's ``ParallelUpdater``): each replica's backward is seeded with one, as
  Chainer's ``loss.backward()`` is, and ``model_main.addgrads(model)`` adds the replicas'
  mean-loss gradients unweighted: with equal shards, ``n`` times the whole batch's mean
  gradient. Batches accumulated with ``accum_grad`` and worker processes keep their shares
  of the update's examples (Chainer has neither): the replicas of one process share its
  weight, each with all of it.

Either way the kvstore sums what the replicas computed. Accumulation, loss scaling and
callbacks work as in the standard updater; the comm callbacks run around the kvstore
reduction. The metrics are the whole batch's (averaged by share under either rule).
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

from .. import devices as gpus
from ..autograd import as_data
from ..backend import Backend
from ..errors import ConfigError, check, check_choice
from ..module import persistents_of
from ..params import ParamStore
from .batches import Batches
from .standard import StandardUpdater

GRAD_REDUCE = ("mean", "sum")
"""How the replicas' gradients combine: see the module docstring."""


class ParallelUpdater(StandardUpdater):
    """:class:`StandardUpdater` over ``devices`` replicas of the main model.

    Args:
        iterator, optimizer, model, batches, verdict, callbacks, profiler:
            as for :class:`StandardUpdater` (one model and one optimizer, or dicts whose
            ``'main'`` entries are replicated).
        devices: the number of replicas, or a list of device ids (CuPy: GPU ids, the first
            being the backend's device, ``batches.backend``; NumPy: CPU replicas, the ids only
            count them).
        sync: the exchange whose kvstore sums the replicas' gradients
            (:class:`~.gradient_sync.GradientSync` of a store from
            :func:`trainer_run.kvstore.create`: ``local``, ``device``, or a dist store, which
            also sums across worker processes); None only for one replica.
        grad_reduce: ``"mean"`` (the whole batch's mean gradient) or ``"sum"`` (Chainer's:
            the replicas' mean-loss gradients added unweighted); see the module docstring.
    """

    def __init__(self, iterator, optimizer, model, *, devices=2, grad_reduce: str = "mean",
                 batches: Batches | None = None, verdict=None, sync=None, callbacks=None,
                 profiler=None):
        self.grad_reduce = check_choice("grad_reduce", grad_reduce, GRAD_REDUCE)
        batches = batches if batches is not None else Batches()
        host = batches.backend if batches.backend is not None else Backend("numpy")
        ids = _device_ids(devices, host)
        check(getattr(sync, "kvstore", None) is not None or len(ids) == 1,
              f"{len(ids)} replicas sum their gradients through a kvstore; pass "
              "sync=GradientSync(trainer_run.kvstore.create('device')) (or 'local', or a dist "
              "store)")
        super().__init__(iterator, optimizer, model, batches=batches, verdict=verdict, sync=sync,
                         callbacks=callbacks, profiler=profiler)
        self.devices = ids
        self.backends = [host] + [_replica_backend(host, d) for d in ids[1:]]
        self.replicas = [self._models["main"]] + [_replicate(self._models["main"], b)
                                                for b in self.backends[1:]]
        self.replica_stores = [self.stores["main"]] + [
            _store(m, b) for m, b in zip(self.replicas[1:], self.backends[1:])]
        self._pool = None

    def on_replicas(self, fn) -> list:
        """``fn(r)`` for every replica ``r``, each in a thread of its own on its backend's
        device (NumPy's overflow warnings silenced there, as in :meth:`update_core`)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(len(self.replicas), thread_name_prefix="replica")
        return list(self._pool.map(lambda r: self._on_replica(r, fn), range(len(self.replicas))))

    def _on_replica(self, r: int, fn):
        with self.backends[r].activate(), self.silent_overflow():
            return fn(r)

    def gradient_weights(self, shares: list[float]) -> list[float]:
        """The replicas' shares (``grad_reduce="mean"``), or for ``"sum"`` their process's
        share of the update's examples for each replica (1 for one batch in one process)."""
        if self.grad_reduce == "mean":
            return shares
        return [sum(shares)] * len(shares)

    def gathered(self, metrics: dict) -> dict:
        """A replica's metrics copied to the main replica's device (where they are added up)."""
        with self.backends[0].activate():
            return {k: as_data(v).copy() for k, v in metrics.items()}

    def apply_update(self, iteration: int, scale: float = 1.0, applied=None) -> None:
        super().apply_update(iteration, scale, applied)
        self.copy_params()

    def copy_params(self) -> None:
        """Copies the main replica's parameters and persistent values (batch statistics: the
        main replica's are the model's) to every other replica (Chainer's copyparams)."""
        main = self.stores["main"]
        for store, backend in zip(self.replica_stores[1:], self.backends[1:]):
            with backend.activate():
                for group, source in zip(store.groups, main.groups):
                    group.data[...] = backend.asarray(source.data)
                store.copy_persistents_from(main, backend.asarray)

    def finalize(self) -> None:
        super().finalize()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def load_state_dict(self, state: dict) -> None:
        """The saved state, then the main replica's parameters copied to every other replica
        (its frozen ones too: they are copied this once, never after an update)."""
        super().load_state_dict(state)
        self.copy_params()
        main = self.stores["main"]
        for store, backend in zip(self.replica_stores[1:], self.backends[1:]):
            with backend.activate():
                store.copy_frozen_from(main, backend.asarray)


def _device_ids(devices, backend) -> list[int]:
    """The replicas' device ids; on a GPU, each must be one this process sees (one line
    saying how many are visible otherwise, not CUDA's traceback)."""
    if isinstance(devices, bool) or not isinstance(devices, (int, list, tuple)):
        raise ConfigError(f"devices must be a number of replicas or a list of device ids, got {devices!r}")
    if isinstance(devices, int):
        check(devices >= 1, f"devices must be >= 1, got {devices}")
        first = backend.device or 0
        ids = list(range(first, first + devices))
    else:
        ids = list(devices)
        check(len(ids) >= 1 and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                    for d in ids) and len(set(ids)) == len(ids),
              f"devices must be distinct device ids >= 0, got {ids}")
    if backend.device is not None:
        check(ids[0] == backend.device, f"devices[0]={ids[0]} must be the backend's device "
              f"({backend.device}); set backend.device={ids[0]} or reorder the list")
        if isinstance(devices, int):
            fix = f"set updater.devices={max(gpus.gpu_count() - ids[0], 1)} or fewer"
        else:
            fix = "list only visible ids in updater.devices"
        gpus.check_visible(ids, f"devices={devices}",
                           f"{fix}, or make more GPUs visible (CUDA_VISIBLE_DEVICES)")
    return ids


def _replica_backend(backend, device: int):
    """The backend a replica runs on: the same one on the host, ``device`` on a GPU."""
    if backend.device is None:
        return backend
    return Backend(backend.name, device=device, dtype=backend.dtype)


def _replicate(model, backend):
    """A deep copy of ``model`` with its parameters on ``backend``'s device."""
    with backend.activate():
        clone = copy.deepcopy(model)
        for p in clone.params().values():
            p.data = backend.asarray(p.data)
            p.grad = None
        for p in persistents_of(clone).values():
            p.data = backend.asarray(p.data)
    return clone


def _store(model, backend) -> ParamStore:
    with backend.activate():
        return ParamStore(model.params(), backend.xp, persistents_of(model))
