"""Kvstores across processes, over MPI (mpi4py): ``dist_sync``, ``dist_device_sync``, ``dist_async``.

Launch one process per rank, ``mpiexec -n 4 trainer-run kvstore=dist_sync``; every process
builds the store with the same type (construction is collective). mpi4py is imported when a
store is built (:mod:`.mpi`), so this module imports without it.

- :mod:`.dist_sync`: ``dist_sync`` and ``dist_device_sync``, every process a worker, each push
  summed over all ranks.
- :mod:`.worker` and :mod:`.server`: ``dist_async``, the last rank a parameter server that
  applies every push as it arrives; :mod:`.wire`: the messages between them.

**Stopping ranks.** A rank that stops with an error calls ``abort(reason)`` (the trainer does
it for any exception): the other ranks raise :class:`~trainer_run.errors.RunStopped` with
``reason`` at their next or current exchange, and the store is then unusable (every later call
raises the same error). No wait is unbounded unless ``timeout=None``: every exchange polls its
MPI request and gives up after ``timeout`` seconds (default 60) with RunStopped and a message
naming the ranks, for a rank that neither answers nor aborts (stuck, or exited without a word).
So ``timeout`` must exceed the longest stretch a rank spends without touching the store while
others wait for it (evaluation, a checkpoint). A rank killed by a signal makes ``mpiexec``
(MPICH's Hydra) end the whole job at once; a rank that exits with a non-zero status does not,
which is what the abort message and the timeout are for. How a process ends afterwards, without
waiting in ``MPI_Finalize`` for a rank that stopped answering, is :mod:`.mpi_job`'s: the first
store of a process joins it with a communicator of its own, and a store that times out
waiting for the other ranks tells it so.

MXNet's refusals reproduced besides the in-process ones (init twice, pull before init, shape
changes, mixed key types): ``pull(..., ignore_sparse=False)`` ("dist kvstore pull doesn't
support ignore_sparse=False"); ``pushpull`` into an output whose dtype is not the key's ("Output
buffer dtype is different"). Not reproduced: MXNet's row-sparse paths (every array here is
dense), the servers' key sharding (one server) and its refusal to save a dist store's optimizer
states.

**Gradient compression** (``set_gradient_compression({'type': '2bit', 'threshold': t})``, MXNet's
2-bit rule of :mod:`.compression`; which keys, and when it may be called: as for the in-process
stores, see :mod:`.push_compression`). As in MXNet's ``KVStoreDist``, the local list is summed
as without compression (the intra-process reduce is not compressed for dist types, on the
device either: MXNet's ``CommDevice::Reduce`` compresses only when the store gave it the
compression, which ``KVStoreDist`` never does), then each worker quantizes that sum on the host
(a device sum is copied to the host first, as MXNet's ``PushCompressed`` quantizes its pinned
host buffer) with its own float32 residual per key. ``init`` is never compressed (MXNet sends
it uncompressed), nor is a pull.
"""

from __future__ import annotations

from . import DIST_TYPES
from .dist_sync import DistDeviceSyncKVStore, DistSyncKVStore
from .worker import DistAsyncKVStore

__all__ = ["DistAsyncKVStore", "DistDeviceSyncKVStore", "DistSyncKVStore", "TYPES"]

_STORES = {store.type: store for store in (DistSyncKVStore, DistDeviceSyncKVStore, DistAsyncKVStore)}
TYPES = {name: _STORES[name] for name in DIST_TYPES}
"""The MPI kvstore classes by type, for each of :data:`trainer_run.kvstore.DIST_TYPES`."""
