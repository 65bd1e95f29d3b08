"""Kvstores across processes, over MPI (mpi4py): ``dist_sync``, ``dist_device_sync``, ``dist_async``.

Launch one process per rank, ``mpiexec -n 4 trainer-run kvstore=dist_sync``; every process
builds the store with the same type (construction is collective). mpi4py is imported when a
store is built, so this module imports without it; a missing mpi4py or MPI is a
:class:`~trainer_run.errors.ConfigError` that says how to install them.

**dist_sync, dist_device_sync.** Every process is a worker: ``rank`` and ``num_workers`` are
its rank in and the size of ``MPI.COMM_WORLD`` (of a private duplicate, so our messages never
meet the user's). As in MXNet 1.9's ``kvstore_dist``:

- ``init(key, value)``: every rank ends with rank 0's value (MXNet: rank 0 pushes it to the
  servers, the others only wait at the barrier). Before anything is stored the ranks check
  that they all init the same keys, in the same order, with the same shapes and dtypes; if not,
  every rank raises the same :class:`ValueError` naming the first rank that differs.
- ``push(key, values)``: the local list is summed in list order into the key's one buffer (as
  the in-process stores do), then the buffer is summed across the ranks in place, one
  ``MPI_Iallreduce(MPI_IN_PLACE, SUM)`` per key on the whole flat buffer (``MPI_Allreduce``
  with ``timeout=None``), no allocation per call. The result replaces the stored value on
  every rank, so ``pull`` (and the pull half of ``pushpull``) copies it out without talking to
  the other ranks. Every rank must push the same keys in the same order, as every MPI
  collective requires; ``barrier()`` waits for every rank.
- Cost beside the bare ``Allreduce``: the store keeps its own copy of each key's sum (MXNet
  keeps it on the server), so ``push`` + ``pull`` copy the buffer twice (into the key's buffer,
  back out) and ``pushpull(key, grad)`` in place once (the sum is taken in ``grad`` itself,
  then copied into the key's buffer). Measured with 2 ranks on one 2-core host, where the
  shared-memory allreduce is itself memory-bound, in-place ``pushpull`` ran at 0.6x (4 MB) to
  0.8x (40 MB) of a bare in-place ``Allreduce`` on the same buffer.
- ``dist_sync`` sums on the host (NumPy), like ``local``. ``dist_device_sync`` sums the local
  list on the device of its first value, like ``device``; with CuPy the buffer goes to MPI
  directly when the MPI library says it is CUDA-aware (``MPIX_Query_cuda_support()``, which
  MPICH and Open MPI export; ``cuda_aware=`` forces the answer), else it is staged through a
  pinned host buffer per key. With NumPy it is ``dist_sync``.

Our rule on the order of the sum over ranks: it is MPI's. The MPI standard only *advises*
that a reduction give the same result on every process and in every run; it does not say in
which order the ranks' values are added. With the MPICH of ``pip install mpich`` (5.0, one
host) we checked float32 buffers of 7 to 3,000,001 values on 2, 3, 4, 5 and 8 ranks: every
rank received the same bytes, a rerun gave the same bytes, and ``Iallreduce`` gave the bytes
of ``Allreduce``; with 2 and 3 ranks the sum equalled ``v0 + v1 (+ v2)`` in rank order, with
4 ranks or more it did not (a tree). Other MPI libraries, other algorithm choices
(``MPIR_CVAR_*ALLREDUCE*``), several hosts or another number of ranks may order the sum
differently; a sum is then reproducible only for the same launch. The tests pin
identical bytes on every rank and exact sums of small integers. float16 keys are summed in
float16 by the MPI (mpi4py's ``MPI.FLOAT16_T``, ``MPIX_C_FLOAT16`` in MPICH 4 and later); an
MPI without float16 reductions refuses them.

**dist_async.** Parameter-server semantics over point-to-point messages. The *last* rank of
``COMM_WORLD`` is the server; ranks ``0 .. size-2`` are the workers, so a worker's ``rank``
is its MPI rank and worker 0 is MPI rank 0 (the one that writes progress and checkpoints).
``num_workers`` counts workers only (``size - 1``; MXNet: the server is not a worker), and
the server's store has ``is_server`` true and ``rank`` None. It needs at least 2 processes.

- The server calls :meth:`DistAsyncKVStore.run_server` with an ``updater(key, grad, weight)``
  that updates ``weight`` in place (``trainer_run.optimizers.get_updater(optimizer)``, the
  optimizer built from the same config as the workers'; MXNet pickles the optimizer to the
  server instead). It owns the weights: rank 0's ``init`` value of each key. It applies every
  push as it arrives, alone, with no waiting for other workers; a ``pull`` answers the
  current weights. It returns ``{key: weights}`` once every worker has called ``close()``.
- Workers: ``init`` (worker 0 sends its value; the others send shape and dtype, which the
  server checks; then a barrier, as MXNet's ``Init``); ``set_optimizer(optimizer)`` (every
  worker, as Gluon does; the server answers whether it has an updater, and whether it is for
  the same optimizer when the updater has an ``optimizer`` attribute); ``push`` (the local sum,
  one message of the whole buffer after a small header; returns once the server has it);
  ``pull`` (a request, then the weights into the key's buffer); ``pushpull`` (push then pull);
  ``barrier`` (all workers); ``close`` (a barrier that also stops the server, as MXNet's
  ``barrier_before_exit`` then ``kStopServer``). A worker's pushes and pulls reach the server
  in the order it makes them (MPI does not overtake), so a pull sees that worker's own
  earlier pushes, and whatever other workers' pushes arrived before it. Each pull also
  reports the server optimizer's ``num_update`` (the store's ``num_update``).
- Optimizer states (beyond MXNet, which refuses to save a dist store's):
  ``get_optimizer_states`` / ``set_optimizer_states`` on a worker fetch and load the server
  updater's ``get_states`` / ``set_states`` (the safe ``.npz`` + JSON format; a blob the
  server refuses, a pickle for one, raises ValueError on the worker), and
  ``save_optimizer_states`` / ``load_optimizer_states`` write and read them as files. This is
  how worker 0 puts the server's states into checkpoints and gives them back on resume.

**Stopping ranks.** A rank that stops with an error calls ``abort(reason)`` (the trainer does
it for any exception): ``dist_sync`` sends ``reason`` to every other rank, and a rank waiting in
(or reaching) an exchange raises :class:`~trainer_run.errors.RunStopped` "rank r stopped:
reason" at once; a ``dist_async`` worker sends it to the server, which stops serving and
answers every other worker's next request with "worker r stopped: reason". The store is then
unusable (every later call raises the same error).

No wait is unbounded unless ``timeout=None``: every exchange polls its MPI request and gives
up after ``timeout`` seconds (default 60) with RunStopped and a message naming the ranks, for
a rank that neither answers nor aborts (stuck, or exited without a word). ``dist_sync``: a
rank that waits longer than ``timeout`` in a sum, broadcast or barrier for the others stops.
``dist_async``: a worker stops when the server does not answer for ``timeout``; the server,
while some workers wait in a barrier or ``close``, declares a worker that has sent nothing for
``timeout`` stopped, tells the waiting workers so (they raise RunStopped with its message) and
raises itself; with no worker waiting it stops after ``timeout`` without any message. So
``timeout`` must exceed the longest stretch a rank spends without touching the store while
others wait for it (evaluation, a checkpoint). A rank killed by a signal makes ``mpiexec``
(MPICH's Hydra) end the whole job at once; a rank that exits with a non-zero status does not,
which is what the abort message and the timeout are for. How a process ends afterwards, without
waiting in ``MPI_Finalize`` for a rank that stopped answering, is :mod:`.mpi_job`'s: the first
store of a process joins it with a communicator of its own, and a store that times out
waiting for the other ranks tells it so.

MXNet's refusals reproduced besides the in-process ones (init twice, pull before init, shape
changes, mixed key types): ``pull(..., ignore_sparse=False)`` ("dist kvstore pull doesn't
support ignore_sparse=False"); ``pushpull`` into an output whose dtype is not the key's ("Output
buffer dtype is different"); ``dist_async``: a push before ``set_optimizer`` (MXNet's server
stops on ``CHECK(updater_)``) and a pull of a key the server has not been given ("init <key>
first"). Not reproduced: MXNet's row-sparse paths (every array here is dense), the servers'
key sharding (one server) and its refusal to save a dist store's optimizer states.

**Gradient compression** (``set_gradient_compression({'type': '2bit', 'threshold': t})``, MXNet's
2-bit rule of :mod:`.compression`; which keys, and when it may be called: as for the in-process
stores, see :mod:`trainer_run.kvstore`). As in MXNet's ``KVStoreDist``, the local list is summed
as without compression (the intra-process reduce is not compressed for dist types, on the
device either: MXNet's ``CommDevice::Reduce`` compresses only when the store gave it the
compression, which ``KVStoreDist`` never does), then each worker quantizes that sum on the host
(a device sum is copied to the host first, as MXNet's ``PushCompressed`` quantizes its pinned
host buffer) with its own float32 residual per key. ``init`` is never compressed (MXNet sends
it uncompressed), nor is a pull.

- ``dist_sync``, ``dist_device_sync``: ``set_gradient_compression`` is collective: every rank
  calls it with the same params before its first push (one 2-value allreduce checks it; a
  mismatch raises the same ConfigError on every rank). Per key, each rank's packed words
  (``ceil(n / 16)`` uint32) go to every rank with one ``MPI_Iallgather`` into a buffer kept per
  key, and every rank dequantizes the ranks' words and sums them in rank order (rank 0 + rank 1
  + ...), so every rank holds the same bytes: the sum MXNet's server makes from the workers'
  compressed pushes (it adds them in arrival order). ``pushpull`` is a compressed push then a
  pull (MXNet's v1.x ``KVStoreDist::PushPullImpl`` refuses compression instead: "Compression
  not supported with PushPull").
- ``dist_async``: each worker's ``set_gradient_compression`` sends the threshold to the server
  (MXNet: rank 0 sends ``kSetGradientCompression``; here every worker does, and the server
  refuses a threshold that differs from another worker's). A compressed push sends the packed
  words instead of the gradient (the header's dtype field says uint32, see ``_HDR``); the server
  dequantizes them into the key's receive buffer with that worker's threshold and applies the
  update as for any push. Errors the server finds are answered on the worker's next pull,
  barrier or ``close``, as for pushes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
import zipfile
import zlib

import numpy

from ..errors import ConfigError, RunStopped, check_number
from . import KVStore, mpi_job
from .compression import GradientCompression
from .placement import HOST, copy_into, import_cupy, place_of

__all__ = ["DEFAULT_TIMEOUT", "DistAsyncKVStore", "DistDeviceSyncKVStore", "DistSyncKVStore", "TYPES"]

DEFAULT_TIMEOUT = 60.0
"""Seconds any exchange waits for the other ranks before raising RunStopped."""


# -- waiting without blocking forever -------------------------------------------------------
def _poll(test, timeout, spin_s=1e-3, yield_s=1.0) -> bool:
    """Calls ``test()`` until it returns true (then True) or ``timeout`` seconds pass (False;
    None waits forever). MPI makes progress inside ``test`` (``MPI_Test``, ``MPI_Iprobe``), so
    it is called back to back for ``spin_s``, then with a yield of the core in between until
    ``yield_s``, then with sleeps growing to 1 ms (a long wait for a slow rank)."""
    if test():
        return True
    start = time.monotonic()
    delay = 2e-5
    while True:
        for _ in range(32):
            if test():
                return True
        waited = time.monotonic() - start
        if timeout is not None and waited >= timeout:
            return bool(test())
        if waited >= yield_s:
            time.sleep(delay)
            delay = min(2 * delay, 1e-3)
        elif waited >= spin_s:
            os.sched_yield()


def _check_timeout(timeout):
    if timeout is None:
        return None
    return check_number("kvstore timeout", timeout, low=0, low_open=True)


def _import_mpi(type_name: str):
    try:
        from mpi4py import MPI
    except ImportError:
        raise ConfigError(f"kvstore={type_name} needs mpi4py and an MPI; install them with "
                          f"pip install 'trainer-run[mpi]'") from None
    except (OSError, RuntimeError) as e:  # mpi4py found no MPI library to load
        raise ConfigError(f"kvstore={type_name} needs mpi4py and an MPI; install them with "
                          f"pip install 'trainer-run[mpi]' ({e})") from None
    return MPI


def _dup(MPI, comm, timeout, type_name):
    """A private duplicate of ``comm`` (``MPI_Comm_idup``, collective), within ``timeout``."""
    comm = MPI.COMM_WORLD if comm is None else comm
    new, request = comm.Idup()
    if not _poll(request.Test, timeout):
        mpi_job.give_up(MPI)
        raise RunStopped(f"kvstore {type_name}: rank {comm.Get_rank()} waited {timeout:g} s for "
                         f"the other {comm.Get_size() - 1} rank(s) to create the store; a rank "
                         f"has stopped or does not create it")
    return new


def _join_job(MPI, comm, timeout, type_name) -> None:
    """The first dist store of the process gives :mod:`.mpi_job` a duplicate of ``comm`` of
    its own, for the job's last exchange when the command ends."""
    if not mpi_job.joined():
        mpi_job.join(MPI, _dup(MPI, comm, timeout, type_name), timeout)


def _mpi_reports_cuda() -> bool:
    """Whether the loaded MPI library says it is CUDA-aware (``MPIX_Query_cuda_support``,
    exported by MPICH >= 4 and Open MPI >= 4). False when it cannot tell."""
    names = []
    try:
        with open("/proc/self/maps") as maps:
            names = sorted({line.split()[-1] for line in maps if "libmpi" in line.rsplit("/", 1)[-1]})
    except OSError:
        pass
    found = ctypes.util.find_library("mpi")
    candidates = [*names, *([found] if found else []), None]
    for name in candidates:
        try:
            query = getattr(ctypes.CDLL(name), "MPIX_Query_cuda_support", None)
        except OSError:
            continue
        if query is not None:
            query.restype = ctypes.c_int
            query.argtypes = []
            return bool(query())
    return False


def _pinned_empty(shape, dtype):
    try:
        import cupyx

        return cupyx.empty_pinned(shape, dtype)
    except (ImportError, AttributeError):
        return numpy.empty(shape, dtype)


def _describe(key, value) -> tuple:
    return (key, numpy.dtype(value.dtype).str, tuple(int(n) for n in value.shape))


# -- dist_sync, dist_device_sync ------------------------------------------------------------
class DistSyncKVStore(KVStore):
    """``dist_sync``: every rank a worker, each push summed over all ranks (module docstring).

    Args:
        timeout: seconds an exchange waits for the other ranks before raising
            :class:`~trainer_run.errors.RunStopped`; None waits forever (then the sums use the
            blocking ``MPI_Allreduce``).
        cuda_aware: whether CuPy buffers may go to MPI directly (``dist_device_sync`` only);
            None asks the MPI library.
        comm: the communicator to duplicate (default ``MPI.COMM_WORLD``).
    """

    type = "dist_sync"

    def __init__(self, timeout: float | None = DEFAULT_TIMEOUT, cuda_aware: bool | None = None,
                 comm=None):
        super().__init__()
        if cuda_aware is not None and not isinstance(cuda_aware, bool):
            raise ConfigError(f"kvstore cuda_aware must be true, false or null (ask the MPI), "
                              f"got {cuda_aware!r}")
        self.timeout = _check_timeout(timeout)
        self._MPI = _import_mpi(self.type)
        self._comm = _dup(self._MPI, comm, self.timeout, self.type)
        _join_job(self._MPI, comm, self.timeout, self.type)
        self.rank = self._comm.Get_rank()
        self.num_workers = self._comm.Get_size()
        self._cuda_aware = cuda_aware
        self._host: dict = {}  # key -> pinned host buffer staging a device buffer
        self._broken: str | None = None

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(type={self.type!r}, rank={self.rank}, "
                f"num_workers={self.num_workers}, keys={len(self._store)})")

    def _place(self, value):
        return HOST

    # -- the interface ------------------------------------------------------------------------
    def init(self, key, value) -> None:
        """Stores rank 0's value under each key on every rank (all ranks call it alike)."""
        self._usable()
        pairs = [(k, v) for k, arrays in self._pairs(key, value, "values") for v in arrays]
        for _, v in pairs:
            place_of(v)
        self._agree([_describe(k, v) for k, v in pairs])
        before = len(self._store)
        super().init(key, value)
        for k in list(self._store)[before:]:
            self._exchange(k, self._store[k], "bcast")

    def pull(self, key, out=None, priority: int = 0, ignore_sparse: bool = True) -> None:
        self._usable()
        if not ignore_sparse:
            raise ValueError("dist kvstore pull doesn't support ignore_sparse=False")
        super().pull(key, out=out, priority=priority)

    def pushpull(self, key, value, out=None, priority: int = 0) -> None:
        """A push then a pull, as one exchange. In its in-place form (``out`` None or
        ``value`` itself) each key's single host value is summed over the ranks where it lies
        and the store keeps that array as the key's value, without a copy: MXNet's store keeps
        a single pushed array itself too, so later writes to it show in a later ``pull``."""
        self._usable()
        values = self._checked(key, value, "value")
        outs = values if out is None or out is value else self._checked(key, out, "out")
        for k, arrays in outs.items():
            _same_dtype(k, arrays[0], self._store[k])
        # (not when the store updates with an optimizer or compresses: those go through _reduce)
        if (outs is values and getattr(self, "_updater", None) is None and self._compression is None
                and self._in_place(values)):
            for k, (array,) in values.items():
                self._exchange(k, array, "sum")
                self._store[k] = array
            return
        super().pushpull(key, value, out=out, priority=priority)

    def _in_place(self, groups: dict) -> bool:
        """Whether every key has one writable C-contiguous host array, none overlapping."""
        arrays = [group[0] for group in groups.values()]
        if any(len(group) != 1 for group in groups.values()) or not all(
                isinstance(a, numpy.ndarray) and self._place(a) is HOST and a.flags.c_contiguous
                and a.flags.writeable for a in arrays):
            return False
        return not any(numpy.may_share_memory(a, b)
                       for i, a in enumerate(arrays) for b in arrays[i + 1:])

    def push(self, key, value, priority: int = 0) -> None:
        self._usable()
        super().push(key, value, priority=priority)

    def barrier(self) -> None:
        """Waits until every rank has called ``barrier``."""
        self._usable()
        if self.timeout is None:
            self._comm.Barrier()
        else:
            self._wait(self._comm.Ibarrier(), ("the barrier",))

    def close(self) -> None:
        """Nothing to stop: every rank is a worker (kept for symmetry with ``dist_async``)."""

    def abort(self, reason: str) -> None:
        """Tells every other rank that this one stops with ``reason``: a rank waiting in an
        exchange (or reaching its next one) raises RunStopped naming this rank and the
        reason, instead of waiting ``timeout`` for it. Does nothing on a store that has
        stopped already (another rank's abort or a timeout)."""
        if self._broken is not None:
            return
        self._broken = f"kvstore {self.type}: rank {self.rank} stopped: {reason}"
        text = numpy.frombuffer(reason.encode(), dtype=numpy.uint8)
        requests = [self._comm.Isend([text, self._MPI.BYTE], r, _ABORT)
                    for r in range(self.num_workers) if r != self.rank]
        _poll(lambda: self._MPI.Request.Testall(requests), 1.0)  # a dead rank: go on

    def set_gradient_compression(self, compression_params) -> None:
        """Compresses every later push of a float32 key (module docstring). Collective: every
        rank calls it with the same params before its first push; otherwise every rank raises
        the same ConfigError (a rank whose own call is refused raises its own error)."""
        self._usable()
        try:
            gc, refused = self._new_compression(compression_params), None
        except ValueError as e:  # ConfigError too
            gc, refused = None, e
        bits = 0 if gc is None else int(numpy.float32(gc.threshold).view(numpy.uint32))
        both = numpy.array([bits, -bits], dtype=numpy.int64)  # positive float32 bits sort as floats
        if self.timeout is None:
            self._comm.Allreduce(self._MPI.IN_PLACE, both, op=self._MPI.MAX)
        else:
            self._wait(self._comm.Iallreduce(self._MPI.IN_PLACE, both, op=self._MPI.MAX),
                       ("set_gradient_compression",))
        if refused is not None:
            raise refused
        low, high = -int(both[1]), int(both[0])
        if low == 0:
            raise ConfigError(f"kvstore {self.type}: set_gradient_compression was refused on another "
                              f"rank; every rank must call it with the same params before its "
                              f"first push")
        if low != high:
            raise ConfigError(f"kvstore {self.type}: the ranks set different gradient compression "
                              f"thresholds, from {_float32(low)!r} to {_float32(high)!r}; every "
                              f"rank must call set_gradient_compression with the same params")
        self._compression = gc

    # -- the sum over ranks ---------------------------------------------------------------------
    def _reduce(self, key, arrays):
        """The local list's sum in list order (the base class, never compressed), then summed
        over the ranks: as it is, or 2-bit compressed."""
        buf = super()._reduce(key, arrays)
        if self._compresses(key):
            self._compressed_sum(key, buf)
        else:
            self._exchange(key, buf, "sum")
        return buf

    def _compressed_sum(self, key, buf) -> None:
        """Quantizes ``buf`` on the host with this rank's residual, gathers every rank's packed
        words (one ``Iallgather``) and writes their dequantized sum, in rank order, into ``buf``."""
        host = buf
        if place_of(buf) is not HOST:
            host = self._host.get(key)
            if host is None or host.shape != buf.shape or host.dtype != buf.dtype:
                host = self._host[key] = _pinned_empty(buf.shape, buf.dtype)
            copy_into(host, buf)
        send = self._quantized(key, host)
        if key not in self._inbox:  # every rank's words, and one rank's values dequantized
            self._inbox[key] = (numpy.empty((self.num_workers, send.size), numpy.uint32),
                                numpy.empty(host.shape, numpy.float32))
        gathered, addend = self._inbox[key]
        if self.timeout is None:
            self._comm.Allgather(send, gathered)
        else:
            self._wait(self._comm.Iallgather(send, gathered), ("the compressed sum of key", key))
        gc, n = self._compression, host.size
        gc.dequantize(gathered[0], n, out=host)
        for words in gathered[1:]:
            numpy.add(host, gc.dequantize(words, n, out=addend), out=host)
        if host is not buf:
            copy_into(buf, host)

    def _exchange(self, key, buf, op: str) -> None:
        """Sums ``buf`` over the ranks in place (``op='sum'``) or overwrites it with rank 0's
        (``'bcast'``); a device buffer goes through its host staging buffer unless MPI is
        CUDA-aware."""
        MPI = self._MPI
        wire = buf
        if place_of(buf) is not HOST:
            cupy = import_cupy()
            with cupy.cuda.Device(buf.device.id):
                cupy.cuda.get_current_stream().synchronize()
            if self._cuda_aware is None:
                self._cuda_aware = _mpi_reports_cuda()
            if not self._cuda_aware:
                wire = self._host.get(key)
                if wire is None or wire.shape != buf.shape or wire.dtype != buf.dtype:
                    wire = self._host[key] = _pinned_empty(buf.shape, buf.dtype)
                if op == "sum" or self.rank == 0:
                    buf.get(out=wire)
        what = ("the sum of key", "the init of key")[op != "sum"], key  # formatted on failure
        if self.timeout is None:
            if op == "sum":
                self._comm.Allreduce(MPI.IN_PLACE, wire, op=MPI.SUM)
            else:
                self._comm.Bcast(wire, root=0)
        elif op == "sum":
            self._wait(self._comm.Iallreduce(MPI.IN_PLACE, wire, op=MPI.SUM), what)
        else:
            self._wait(self._comm.Ibcast(wire, root=0), what)
        if wire is not buf:
            copy_into(buf, wire)

    def _agree(self, described: list) -> None:
        """Raises the same ValueError on every rank unless all ranks describe the same
        ``(key, dtype, shape)`` list (one 2-value allreduce of a digest; the lists themselves
        travel only when they differ)."""
        digest = zlib.crc32(repr(described).encode())
        both = numpy.array([digest, -digest], dtype=numpy.int64)
        if self.timeout is None:
            self._comm.Allreduce(self._MPI.IN_PLACE, both, op=self._MPI.MAX)
        else:
            self._wait(self._comm.Iallreduce(self._MPI.IN_PLACE, both, op=self._MPI.MAX),
                       ("the check of the init keys",))
        if both[0] == -both[1]:  # max(digest) == min(digest)
            return
        everyone = self._comm.allgather(described)  # every rank is here: the digests arrived
        other = next(r for r, d in enumerate(everyone) if d != everyone[0])
        raise ValueError(f"kvstore {self.type} init: the ranks do not init the same keys with "
                         f"the same shapes and dtypes: rank 0 inits {_pretty(everyone[0])}, "
                         f"rank {other} inits {_pretty(everyone[other])}; every rank must "
                         f"init the same keys in the same order (rank 0's values are kept)")

    def _wait(self, request, what: tuple) -> None:
        """Polls ``request`` until done; RunStopped after ``timeout`` s, or at once when
        another rank aborts. ``what`` names the exchange: ``(text,)`` or ``(text, key)``."""
        if _poll(lambda: request.Test() or self._aborted(), self.timeout) and self._broken is None:
            return
        if self._broken is not None:
            raise RunStopped(self._broken)
        what = what[0] if len(what) == 1 else f"{what[0]} {what[1]!r}"
        mpi_job.give_up(self._MPI)
        self._broken = (f"kvstore {self.type}: rank {self.rank} waited {self.timeout:g} s for "
                        f"the other {self.num_workers - 1} rank(s) in {what}; a rank has "
                        f"stopped (crashed, or exited without reaching it) or is stuck. A rank "
                        f"that works longer than the timeout between exchanges needs a larger "
                        f"kvstore timeout")
        raise RunStopped(self._broken)

    def _aborted(self) -> bool:
        """Whether another rank's :meth:`abort` message has arrived (then the store is broken
        with its reason)."""
        status = self._MPI.Status()
        if not self._comm.Iprobe(self._MPI.ANY_SOURCE, _ABORT, status):
            return False
        text = bytearray(status.Get_count(self._MPI.BYTE))
        self._comm.Recv([text, self._MPI.BYTE], status.Get_source(), _ABORT)
        self._broken = (f"kvstore {self.type}: rank {status.Get_source()} stopped: "
                        f"{text.decode(errors='replace')}")
        return True

    def _usable(self) -> None:
        if self._broken is not None:
            raise RunStopped(self._broken)


_ABORT = 7399  # the tag of a dist_sync rank's abort message


class DistDeviceSyncKVStore(DistSyncKVStore):
    """``dist_device_sync``: ``dist_sync`` with each local list summed on its first value's
    device, and CuPy buffers reduced through MPI on the device when it is CUDA-aware."""

    type = "dist_device_sync"

    def _place(self, value):
        return place_of(value)


def _same_dtype(key, out, stored) -> None:
    if out.dtype != stored.dtype:
        raise ValueError(f"kvstore key {key!r}: Output buffer dtype is different: pushpull "
                         f"into {out.dtype}, the key holds {stored.dtype} (dist kvstores pull "
                         f"into the key's dtype only)")


def _float32(bits: int) -> float:
    """The float32 whose bits are ``bits``, as a Python float."""
    return float(numpy.uint32(bits).view(numpy.float32))


def _pretty(described) -> str:
    return "[" + ", ".join(f"{k!r}: {numpy.dtype(d).name}{list(s)}" for k, d, s in described) + "]"


# -- dist_async -----------------------------------------------------------------------------
# A message is a header of _HDR int64 on _REQ (worker -> server) or _REP (server -> worker),
# followed, when its nbytes field is not 0, by one message of raw bytes on _REQ_DATA /
# _REP_DATA: the array (or the key's name, or an error text).
_REQ, _REQ_DATA, _REP, _REP_DATA = 7301, 7302, 7303, 7304
_HDR, _MAX_NDIM = 40, 32
# header fields: 0 kind or status, 1 key code, 2 nbytes of the data message, 3 dtype char or
# error class, 4 length of the key's name (str keys, init), 5 ndim, 8.. the shape.
# Gradient compression: a _PUSH whose dtype char is _PACKED (uint32) to a float32 key carries
# 2-bit packed words; a _COMPRESSION header carries the threshold's float32 bits in field 1.
_INIT, _DECLARE, _PUSH, _PULL, _BARRIER, _OPTIMIZER, _STOP, _GONE = range(1, 9)
_COMPRESSION, _GET_STATES, _SET_STATES, _ABORTED = range(9, 13)
# the answer to a pull carries the server optimizer's num_update in field 6 (-1: none)
_PACKED = ord(numpy.dtype(numpy.uint32).char)
_OK, _ERROR, _ALIVE = 0, 1, 2
_ERRORS = {1: ValueError, 2: ConfigError, 3: RunStopped}
_ERROR_CODES = {ValueError: 1, ConfigError: 2, RunStopped: 3}


class DistAsyncKVStore(KVStore):
    """``dist_async``: the last rank serves the weights, the others push and pull alone.

    Build it on every rank; then the server calls :meth:`run_server` and the workers use the
    store (module docstring).

    Args:
        timeout: seconds a worker waits for the server, and the server for a worker that
            others wait for, before raising :class:`~trainer_run.errors.RunStopped`; None waits
            forever.
        comm: the communicator to duplicate (default ``MPI.COMM_WORLD``).
    """

    type = "dist_async"

    def __init__(self, timeout: float | None = DEFAULT_TIMEOUT, comm=None):
        super().__init__()
        self.timeout = _check_timeout(timeout)
        self._MPI = _import_mpi(self.type)
        size = (self._MPI.COMM_WORLD if comm is None else comm).Get_size()
        if size < 2:
            raise ConfigError(f"kvstore=dist_async needs at least 2 processes, 1 server and "
                              f"1 worker, got {size}; launch it with e.g. mpiexec -n 3 "
                              f"(the last rank serves, the others are workers)")
        self._comm = _dup(self._MPI, comm, self.timeout, self.type)
        _join_job(self._MPI, comm, self.timeout, self.type)
        self.server_rank = size - 1
        self.is_server = self._comm.Get_rank() == self.server_rank
        self.rank = None if self.is_server else self._comm.Get_rank()
        self.num_workers = size - 1
        self._out = numpy.zeros(_HDR, dtype=numpy.int64)  # outgoing header, reused
        self._in = numpy.zeros(_HDR, dtype=numpy.int64)  # incoming header, reused
        self._codes: dict = {}  # key -> its int64 code on the wire
        self._names: dict = {}  # code -> key
        self._optimizer = False
        self._closed = False
        self._broken: str | None = None
        self.num_update: int | None = None
        """The server optimizer's ``num_update`` at this worker's last pull (None: unknown)."""

    def __repr__(self) -> str:
        who = "server" if self.is_server else f"rank={self.rank}"
        return f"DistAsyncKVStore({who}, num_workers={self.num_workers}, keys={len(self._store)})"

    def _place(self, value):
        return HOST

    # -- workers --------------------------------------------------------------------------------
    def init(self, key, value) -> None:
        """Gives the server worker 0's value of each key (the others' are only checked
        against it), then waits for every worker, as MXNet's ``Init``."""
        self._worker("init")
        before = len(self._store)
        super().init(key, value)
        for k in list(self._store)[before:]:
            stored, code = self._store[k], self._code(k)
            if self.rank == 0:
                name = k.encode() if isinstance(k, str) else b""
                self._send(_INIT, code, stored, name=name, what=f"the init of key {k!r}")
            else:
                self._send(_DECLARE, code, meta=stored, what=f"the init of key {k!r}")
        self._send(_BARRIER, what="the barrier after init")
        self._reply("the barrier after init")

    def set_optimizer(self, optimizer) -> None:
        """Lets the server apply pushes (call it on every worker, as Gluon does); the server
        must have been started with an updater for the same optimizer."""
        self._worker("set_optimizer")
        name = numpy.frombuffer(type(optimizer).__name__.lower().encode(), dtype=numpy.uint8)
        self._send(_OPTIMIZER, data=name, what="set_optimizer")
        self._reply("set_optimizer")
        self._optimizer = True

    def push(self, key, value, priority: int = 0) -> None:
        """Sends the sum of each key's local list to the server, which applies it alone."""
        self._worker("push")
        groups = self._checked(key, value, "value")
        if not self._optimizer:
            raise ValueError("kvstore dist_async: push before set_optimizer: the server applies "
                             "every push with the optimizer (MXNet's server stops on "
                             "CHECK(updater_)); call set_optimizer(optimizer) on every worker "
                             "first")
        for k, arrays in groups.items():
            data = self._reduce(k, arrays)
            if self._compresses(k):
                data = self._quantized(k, data)  # uint32 words: the header says so
            self._send(_PUSH, self._code(k), data, what=f"the push of key {k!r}")

    def set_gradient_compression(self, compression_params) -> None:
        """Compresses this worker's later pushes of float32 keys and tells the server the
        threshold (call it on every worker, with the same params, before its first push).
        The server's refusal, if any, is raised by the next pull, barrier or ``close``."""
        self._worker("set_gradient_compression")
        gc = self._new_compression(compression_params)
        bits = int(numpy.float32(gc.threshold).view(numpy.uint32))
        self._send(_COMPRESSION, bits, what="set_gradient_compression")
        self._compression = gc

    def pull(self, key, out=None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copies the server's current weights of each key into ``out``."""
        self._worker("pull")
        if not ignore_sparse:
            raise ValueError("dist kvstore pull doesn't support ignore_sparse=False")
        if out is None:
            raise ValueError("kvstore pull needs out=: the array(s) to copy the value into")
        self._fetch(self._checked(key, out, "out"))

    def pushpull(self, key, value, out=None, priority: int = 0) -> None:
        """A push, then a pull into ``out`` (into ``value`` when ``out`` is None)."""
        self._worker("pushpull")
        outs = self._checked(key, value if out is None else out, "out")
        for k, arrays in outs.items():
            _same_dtype(k, arrays[0], self._store[k])
        self.push(key, value, priority)
        self._fetch(outs)

    def barrier(self) -> None:
        """Waits until every worker has called ``barrier`` (the server is no worker)."""
        self._worker("barrier")
        self._send(_BARRIER, what="the barrier")
        self._reply("the barrier")

    def close(self) -> None:
        """Waits for every worker to close, then the server stops; later calls do nothing."""
        if self.is_server or self._closed or self._broken is not None:
            return  # a broken store has stopped already
        self._send(_STOP, what="close()")
        self._reply("close()")
        self._closed = True

    def abort(self, reason: str) -> None:
        """Tells the server that this worker stops with ``reason``; the server stops serving
        and every other worker raises RunStopped with it at its next exchange. Does nothing
        on a closed store or one that has stopped already."""
        if self.is_server or self._closed or self._broken is not None:
            return
        self._broken = f"kvstore dist_async: worker {self.rank} stopped: {reason}"
        text = numpy.frombuffer(reason.encode(), dtype=numpy.uint8)
        try:
            self._send(_ABORTED, data=text, what="abort")
        except RunStopped:
            pass  # the server is gone: nobody to tell

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The server updater's ``get_states(dump_optimizer)``: its optimizer states in the
        safe format (MXNet refuses to save states of a dist store; here worker 0 checkpoints
        them)."""
        self._worker("get_optimizer_states")
        self._send(_GET_STATES, int(dump_optimizer), what="get_optimizer_states")
        return bytes(self._reply("get_optimizer_states", sized=True))

    def set_optimizer_states(self, blob: bytes) -> None:
        """Loads :meth:`get_optimizer_states` output into the server's updater (its
        ``set_states``); the server's refusal is raised here."""
        self._worker("set_optimizer_states")
        self._send(_SET_STATES, data=numpy.frombuffer(blob, dtype=numpy.uint8),
                   what="set_optimizer_states")
        self._reply("set_optimizer_states")

    def _need_updater(self, verb: str) -> None:
        """The states live on the server, which answers whether it has an updater."""

    def _fetch(self, groups: dict) -> None:
        for k, outs in groups.items():
            buf = self._store[k]
            self._send(_PULL, self._code(k), what=f"the pull of key {k!r}")
            self._reply(f"the pull of key {k!r}", into=buf)
            count = int(self._in[6])
            self.num_update = count if count >= 0 else None
            for o in outs:
                copy_into(o, buf)

    def _code(self, key) -> int:
        code = self._codes.get(key)
        if code is None:
            if isinstance(key, str):
                code = zlib.crc32(key.encode())
            elif -(2 ** 63) <= key < 2 ** 63:
                code = key
            else:
                raise ValueError(f"kvstore key {key!r}: dist_async keys must fit in 64 bits")
            if code in self._names:
                raise ValueError(f"kvstore keys {self._names[code]!r} and {key!r} share the code "
                                 f"{code} on the wire; rename one")
            self._codes[key], self._names[code] = code, key
        return code

    def _worker(self, what: str) -> None:
        if self.is_server:
            raise ValueError(f"kvstore dist_async: rank {self.server_rank} is the server, it "
                             f"cannot {what}; call run_server(updater) there")
        if self._closed:
            raise ValueError(f"kvstore dist_async: {what} after close()")
        self._usable()

    def _usable(self) -> None:
        if self._broken is not None:
            raise RunStopped(self._broken)

    def _send(self, kind, code=0, data=None, *, meta=None, name=b"", what: str) -> None:
        """Sends a header (and ``name``, then ``data``, as raw bytes) to the server and waits
        until it has taken them."""
        MPI, h = self._MPI, self._out
        h[:] = 0
        h[0], h[1] = kind, code
        array = data if data is not None else meta
        if array is not None:
            if array.ndim > _MAX_NDIM:
                raise ValueError(f"kvstore dist_async: {what}: at most {_MAX_NDIM} dimensions")
            h[3], h[5] = ord(array.dtype.char), array.ndim
            h[8:8 + array.ndim] = array.shape
        h[2] = 0 if data is None else data.nbytes
        h[4] = len(name)
        requests = [self._comm.Isend([h, MPI.INT64_T], self.server_rank, _REQ)]
        if name:
            requests.append(self._comm.Isend([name, MPI.BYTE], self.server_rank, _REQ_DATA))
        if data is not None:
            requests.append(self._comm.Isend([data, MPI.BYTE], self.server_rank, _REQ_DATA))
        if not _poll(lambda: MPI.Request.Testall(requests), self.timeout):
            self._give_up(what)

    def _reply(self, what: str, into=None, sized: bool = False):
        """Waits for the server's answer (its keep-alives restart the clock); the data goes
        into ``into``, or with ``sized`` into a new bytearray of the size announced, which is
        returned; an error answer is raised here."""
        MPI, h = self._MPI, self._in
        while True:
            request = self._comm.Irecv([h, MPI.INT64_T], self.server_rank, _REP)
            if not _poll(request.Test, self.timeout):
                request.Cancel()
                self._give_up(what)
            if h[0] != _ALIVE:
                break
        status, nbytes, error = int(h[0]), int(h[2]), int(h[3])
        if status == _ERROR:
            text = bytearray(nbytes)
            request = self._comm.Irecv([text, MPI.BYTE], self.server_rank, _REP_DATA)
            if not _poll(request.Test, self.timeout):
                self._give_up(what)
            cls = _ERRORS.get(error, RunStopped)
            message = text.decode(errors="replace")
            if cls is RunStopped:
                self._broken = message
                if what != "close()":
                    self._gone()
            raise cls(message)
        if sized:
            into = numpy.empty(nbytes, dtype=numpy.uint8)
        if nbytes:
            if into is None or into.nbytes != nbytes:
                self._broken = (f"kvstore dist_async: rank {self.rank}: the server answered "
                                f"{what} with {nbytes} bytes, expected "
                                f"{0 if into is None else into.nbytes}")
                raise RunStopped(self._broken)
            request = self._comm.Irecv([into, MPI.BYTE], self.server_rank, _REP_DATA)
            if not _poll(request.Test, self.timeout):
                self._give_up(what)
        return into

    def _gone(self) -> None:
        """Tells a server that gave up that this worker has stopped too (no answer comes)."""
        h = self._out
        h[:] = 0
        h[0] = _GONE
        request = self._comm.Isend([h, self._MPI.INT64_T], self.server_rank, _REQ)
        _poll(request.Test, 1.0)

    def _give_up(self, what: str):
        mpi_job.give_up(self._MPI)
        self._broken = (f"kvstore dist_async: worker {self.rank} got no answer from the server "
                        f"(rank {self.server_rank}) for {self.timeout:g} s in {what}; the "
                        f"server has stopped (crashed, or gave up on another worker) or is stuck")
        raise RunStopped(self._broken)

    # -- the server -----------------------------------------------------------------------------
    def run_server(self, updater=None) -> dict:
        """Serves the workers until every one has called ``close()``; returns the final
        weights ``{key: array}``.

        Args:
            updater: ``updater(key, grad, weight)``, updating ``weight`` in place with the
                optimizer built from the workers' config (e.g.
                ``trainer_run.optimizers.get_updater(optimizer)``). Pushes are refused until
                a worker has called ``set_optimizer``, which is refused without an updater.

        Raises:
            RunStopped: a worker stopped talking for ``timeout`` while others waited for it,
                or no worker sent anything for ``timeout``; the waiting workers get the same
                message. An exception of ``updater`` is re-raised once the workers know.
        """
        if not self.is_server:
            raise ValueError(f"kvstore dist_async: run_server on worker {self.rank}: only the "
                             f"last rank ({self.server_rank}) serves")
        if updater is not None and not callable(updater):
            raise TypeError(f"run_server: updater must be callable(key, grad, weight), got "
                            f"{updater!r}")
        if self._closed:
            raise ValueError("kvstore dist_async: run_server after it returned")
        server = _Server(self, updater)
        try:
            return server.run()
        finally:
            self._closed = True


class _Server:
    """The server loop of :class:`DistAsyncKVStore`: one message at a time, in arrival order."""

    def __init__(self, store: DistAsyncKVStore, updater):
        self.kv, self.updater = store, updater
        self.MPI, self.comm, self.timeout = store._MPI, store._comm, store.timeout
        self.n = store.num_workers
        self.keepalive = 5.0 if self.timeout is None else min(self.timeout / 4, 5.0)
        self.weights: dict = {}  # code -> array
        self.grads: dict = {}  # code -> receive buffer of a push
        self.compressions: dict = {}  # worker -> its GradientCompression
        self.packed: dict = {}  # code -> receive buffer of a compressed push
        self.names: dict = {}  # code -> str key (str keys only)
        self.declared: dict = {}  # code -> [(worker, dtype, shape)], checked at the barrier
        self.errors: dict = {}  # worker -> (class, message), answered on its next request
        self.waiting: dict = {}  # worker -> "barrier" | "close"
        self.stopped: set = set()
        self.active = False  # a worker has called set_optimizer
        self.failure = None  # (exception to raise, message) once the server gives up
        now = time.monotonic()
        self.last_seen = [now] * self.n
        self.last_any = self.last_alive = now
        self.h = numpy.zeros(_HDR, dtype=numpy.int64)
        self.status = self.MPI.Status()

    def run(self) -> dict:
        MPI, comm, status = self.MPI, self.comm, self.status
        probe = lambda: comm.Iprobe(MPI.ANY_SOURCE, _REQ, status)  # noqa: E731
        while not self._finished():
            if _poll(probe, self.keepalive, yield_s=0.02):
                source = status.Get_source()
                comm.Recv([self.h, MPI.INT64_T], source, _REQ)
                self.last_seen[source] = self.last_any = time.monotonic()
                self._handle(source, self.h)
            self._check_clock()
        if self.failure is not None:
            raise self.failure[0]
        return {self.names.get(code, code): w for code, w in self.weights.items()}

    def _finished(self) -> bool:
        if self.failure is None:
            return len(self.stopped) == self.n
        # after a failure: until every worker has stopped or gone silent, or none talks
        now = time.monotonic()
        silent = {w for w in range(self.n) if self._silent(w, now)}
        return len(self.stopped | silent) == self.n or self._silent(None, now)

    def _silent(self, worker, now) -> bool:
        if self.timeout is None:
            return False
        last = self.last_any if worker is None else self.last_seen[worker]
        return now - last >= self.timeout

    # -- messages -------------------------------------------------------------------------------
    def _handle(self, worker, h) -> None:
        kind, code, nbytes = int(h[0]), int(h[1]), int(h[2])
        if kind in (_INIT, _PUSH, _OPTIMIZER, _SET_STATES, _ABORTED):
            name = self._receive(worker, bytearray(int(h[4]))) if h[4] else None
            data = self._take(worker, kind, code, nbytes, h)
        if kind in (_GONE, _ABORTED):
            self.stopped.add(worker)
            self.waiting.pop(worker, None)
            if kind == _ABORTED:
                self._fail(RunStopped, f"kvstore dist_async: worker {worker} stopped: "
                                       f"{bytes(data).decode(errors='replace')}")
            return
        if self.failure is not None:
            if kind == _STOP:
                self.stopped.add(worker)
            if kind in (_PULL, _BARRIER, _OPTIMIZER, _STOP, _GET_STATES, _SET_STATES):
                self._answer_error(worker, RunStopped, self.failure[1])
            return
        if kind == _INIT:
            self._init(worker, code, data, name)
        elif kind == _DECLARE:
            self._declare(worker, code, _meta(h))
        elif kind == _PUSH:
            self._push(worker, code, data)
        elif kind == _PULL:
            self._pull(worker, code)
        elif kind == _OPTIMIZER:
            self._set_optimizer(worker, bytes(data).decode())
        elif kind == _COMPRESSION:
            self._set_compression(worker, code)
        elif kind == _GET_STATES:
            self._get_states(worker, bool(code))
        elif kind == _SET_STATES:
            self._set_states(worker, bytes(data))
        elif kind == _BARRIER:
            self.waiting[worker] = "barrier"
            self._release()
        elif kind == _STOP:
            self.stopped.add(worker)
            self.waiting[worker] = "close"
            self._release()

    def _take(self, worker, kind, code, nbytes, h):
        """Receives the data message after a header: into the key's push buffer when it fits,
        else into a new array (init) or scratch bytes (to be refused)."""
        if (kind == _PUSH and code in self.grads and int(h[3]) == _PACKED
                and self.grads[code].dtype == numpy.float32):
            return self._take_packed(worker, code, nbytes)
        if kind == _PUSH and code in self.grads and self.grads[code].nbytes == nbytes:
            return self._receive(worker, self.grads[code])
        if kind == _INIT:
            dtype, shape = _meta(h)
            array = numpy.empty(shape, dtype)
            if array.nbytes == nbytes:
                return self._receive(worker, array)
        return self._receive(worker, bytearray(nbytes))

    def _take_packed(self, worker, code, nbytes):
        """Receives a compressed push and dequantizes it, with the worker's threshold, into
        the key's push buffer (returned); a push the server cannot read is refused."""
        grad, gc = self.grads[code], self.compressions.get(worker)
        words = 0 if gc is None else gc.get_compressed_size(grad.size)
        if gc is None or nbytes != 4 * words:
            why = ("its set_gradient_compression did not reach the server or was refused" if gc is None
                   else f"{nbytes} bytes of words, the key needs {4 * words}")
            self._refuse(worker, ValueError, f"kvstore key {self._key(code)!r}: worker {worker} "
                                             f"pushed 2-bit compressed words, but {why}")
            return self._receive(worker, bytearray(nbytes))
        packed = self.packed.get(code)
        if packed is None:
            packed = self.packed[code] = numpy.empty(words, numpy.uint32)
        return gc.dequantize(self._receive(worker, packed), grad.size, out=grad)

    def _receive(self, worker, into):
        request = self.comm.Irecv([into, self.MPI.BYTE], worker, _REQ_DATA)
        if not _poll(request.Test, self.timeout):
            self._fail(RunStopped, f"worker {worker} sent a header but not its data for "
                                   f"{self.timeout:g} s")
        return into

    def _init(self, worker, code, data, name) -> None:
        if name is not None:
            self.names[code] = bytes(name).decode()
        key = self._key(code)
        if code in self.weights:
            self._refuse(worker, ValueError, f"duplicate init of kvstore key {key!r}")
            return
        self.weights[code] = data
        self.grads[code] = numpy.empty_like(data)
        for other, dtype, shape in self.declared.pop(code, []):
            self._compare(other, code, dtype, shape)

    def _declare(self, worker, code, meta) -> None:
        if code in self.weights:
            self._compare(worker, code, *meta)
        else:
            self.declared.setdefault(code, []).append((worker, *meta))

    def _compare(self, worker, code, dtype, shape) -> None:
        w = self.weights[code]
        if (w.dtype, w.shape) != (dtype, shape):
            self._refuse(worker, ValueError,
                         f"kvstore dist_async init: worker {worker} inits key "
                         f"{self._key(code)!r} as {dtype.name}{list(shape)}, worker 0 as "
                         f"{w.dtype.name}{list(w.shape)}; every worker must init the same keys "
                         f"with the same shapes and dtypes (worker 0's values are kept)")

    def _push(self, worker, code, grad) -> None:
        key = self._key(code)
        if code not in self.weights:
            self._refuse(worker, ValueError, f"kvstore key {key!r}: push before the server "
                                             f"has it: init {key!r} first")
        elif not self.active or self.updater is None:
            self._refuse(worker, ValueError, "kvstore dist_async: a push reached the server "
                                             "before set_optimizer")
        elif grad is not self.grads[code]:
            self._refuse(worker, ValueError, f"kvstore key {key!r}: pushed {len(grad)} bytes, "
                                             f"the key holds {self.grads[code].nbytes}")
        else:
            try:
                self.updater(key, grad, self.weights[code])
            except Exception as e:
                self._fail(e, f"kvstore dist_async server: the update of key {key!r} pushed by "
                              f"worker {worker} failed: {type(e).__name__}: {e}")

    def _pull(self, worker, code) -> None:
        if worker in self.errors:
            self._answer_error(worker, *self.errors.pop(worker))
        elif code not in self.weights:
            self._answer_error(worker, ValueError, f"kvstore key {self._key(code)!r}: the "
                                                   f"server does not have it: init it first")
        else:
            count = getattr(getattr(self.updater, "optimizer", None), "num_update", None)
            self._answer(worker, _OK, code, self.weights[code], count=-1 if count is None else count)

    def _get_states(self, worker, dump_optimizer: bool) -> None:
        if not hasattr(self.updater, "get_states"):
            self._answer_error(worker, ValueError, "kvstore dist_async: the server's updater "
                               "has no get_states, so it cannot give its optimizer states")
            return
        blob = self.updater.get_states(dump_optimizer)
        self._answer(worker, _OK, data=numpy.frombuffer(blob, dtype=numpy.uint8))

    def _set_states(self, worker, blob: bytes) -> None:
        """Loads worker's states into the updater; an updater without ``set_states``, or
        states it refuses (another optimizer, other shapes, not our format), are an error."""
        if not hasattr(self.updater, "set_states"):
            self._answer_error(worker, ValueError, "kvstore dist_async: the server's updater "
                               "has no set_states, so it cannot load optimizer states")
            return
        try:
            self.updater.set_states(blob)
        except (ValueError, KeyError, OSError, zipfile.BadZipFile) as e:
            self._answer_error(worker, ValueError, f"kvstore dist_async: the server cannot load "
                                                   f"the optimizer states of worker {worker}: {e}")
            return
        self._answer(worker, _OK)

    def _set_compression(self, worker, bits) -> None:
        """Records the worker's threshold (float32 ``bits``); one that differs from another
        worker's is refused."""
        try:
            gc = GradientCompression({"type": "2bit", "threshold": _float32(bits)})
        except ConfigError as e:
            self._refuse(worker, ConfigError, f"kvstore dist_async: worker {worker}: {e}")
            return
        for other, known in self.compressions.items():
            if other != worker and known.threshold != gc.threshold:
                self._refuse(worker, ConfigError, f"kvstore dist_async: worker {worker} sets "
                             f"gradient compression threshold {gc.threshold!r}, worker {other} "
                             f"set {known.threshold!r}; every worker must call "
                             f"set_gradient_compression with the same params")
                return
        self.compressions[worker] = gc

    def _set_optimizer(self, worker, name) -> None:
        if self.updater is None:
            self._answer_error(worker, ConfigError, "kvstore dist_async: set_optimizer, but the "
                               "server was started without an updater: call "
                               "run_server(get_updater(optimizer)) on the last rank with the "
                               "optimizer of the workers' config")
            return
        mine = getattr(self.updater, "optimizer", None)
        if mine is not None and type(mine).__name__.lower() != name:
            self._answer_error(worker, ConfigError, f"kvstore dist_async: worker {worker} sets "
                               f"optimizer {name}, the server's updater runs "
                               f"{type(mine).__name__.lower()}; build both from the same config")
            return
        self.active = True
        self._answer(worker, _OK)

    def _release(self) -> None:
        """Answers the barrier when every worker waits in it, and close() when every worker
        has closed; a barrier that a closed worker can never join is an error."""
        barrier = [w for w, why in self.waiting.items() if why == "barrier"]
        if len(self.stopped) == self.n:
            for w in list(self.waiting):
                if w in self.errors:
                    self._answer_error(w, *self.errors.pop(w))
                else:
                    self._answer(w, _OK)
            self.waiting.clear()
        elif barrier and self.stopped:
            for w in barrier:
                del self.waiting[w]
                self._answer_error(w, ValueError, f"kvstore dist_async: barrier after worker(s) "
                                   f"{_ranks(self.stopped)} closed the store; a barrier "
                                   f"needs every worker")
        elif len(barrier) == self.n:
            for code, declarations in self.declared.items():
                for worker, _, _ in declarations:
                    self._refuse(worker, ValueError, f"kvstore key {self._key(code)!r} was "
                                 f"inited on worker {worker} but not on worker 0; every "
                                 f"worker must init the same keys")
            self.declared.clear()
            self.waiting.clear()
            for w in barrier:
                if w in self.errors:
                    self._answer_error(w, *self.errors.pop(w))
                else:
                    self._answer(w, _OK)

    # -- answers, failures, the clock ----------------------------------------------------------
    def _refuse(self, worker, cls, message) -> None:
        """An error for ``worker``, answered on its next pull, barrier or close."""
        self.errors.setdefault(worker, (cls, message))

    def _answer(self, worker, status, code=0, data=None, count: int = -1) -> None:
        MPI, h = self.MPI, numpy.zeros(_HDR, dtype=numpy.int64)
        h[0], h[1] = status, code
        h[2] = 0 if data is None else data.nbytes
        h[6] = count
        requests = [self.comm.Isend([h, MPI.INT64_T], worker, _REP)]
        if data is not None and data.nbytes:
            requests.append(self.comm.Isend([data, MPI.BYTE], worker, _REP_DATA))
        if not _poll(lambda: MPI.Request.Testall(requests), self.timeout):
            self._fail(RunStopped, f"kvstore dist_async server: worker {worker} did not take "
                                   f"its answer for {self.timeout:g} s")

    def _answer_error(self, worker, cls, message) -> None:
        MPI, h = self.MPI, numpy.zeros(_HDR, dtype=numpy.int64)
        text = message.encode()
        h[0], h[2], h[3] = _ERROR, len(text), _ERROR_CODES.get(cls, 3)
        requests = [self.comm.Isend([h, MPI.INT64_T], worker, _REP),
                    self.comm.Isend([text, MPI.BYTE], worker, _REP_DATA)]
        _poll(lambda: MPI.Request.Testall(requests), self.timeout)  # a dead worker: go on

    def _fail(self, error, message) -> None:
        """Gives up: tells the waiting workers, then (in :meth:`run`) answers every request
        with ``message`` until the workers have stopped, and raises ``error``."""
        if self.failure is not None:
            return
        if not isinstance(error, BaseException):
            error = error(message)
        self.failure = (error, message)
        for w in list(self.waiting):  # they raise, and count as stopped
            self._answer_error(w, RunStopped, message)
            self.stopped.add(w)
        self.waiting.clear()

    def _check_clock(self) -> None:
        now = time.monotonic()
        if self.failure is not None or self.timeout is None:
            return
        if self.waiting:
            missing = [w for w in range(self.n) if w not in self.waiting]
            dead = [w for w in missing if self._silent(w, now)]
            if dead:
                why = sorted(set(self.waiting.values()))
                self._fail(RunStopped, f"kvstore dist_async server: worker(s) {_ranks(dead)} sent "
                           f"nothing for {self.timeout:g} s while worker(s) "
                           f"{_ranks(self.waiting)} waited for them in "
                           f"{' and '.join('close()' if w == 'close' else w for w in why)}; a "
                           f"worker has stopped (crashed, or exited without close()) or is "
                           f"stuck")
                return
        elif self._silent(None, now):
            self._fail(RunStopped, f"kvstore dist_async server: no worker sent anything for "
                       f"{self.timeout:g} s; the workers have stopped (crashed, or exited "
                       f"without close()) or are stuck")
            return
        if self.waiting and now - self.last_alive >= self.keepalive:
            self.last_alive = now
            for w in self.waiting:
                self._answer(w, _ALIVE)

    def _key(self, code):
        return self.names.get(code, code)


def _meta(h) -> tuple:
    ndim = int(h[5])
    return numpy.dtype(chr(int(h[3]))), tuple(int(n) for n in h[8:8 + ndim])


def _ranks(ranks) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


TYPES = {"dist_sync": DistSyncKVStore, "dist_device_sync": DistDeviceSyncKVStore,
         "dist_async": DistAsyncKVStore}
"""The MPI kvstore types, by name."""
