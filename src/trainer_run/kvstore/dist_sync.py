"""``dist_sync`` and ``dist_device_sync``: every process a worker, each push summed over all
ranks with MPI collectives.

``rank`` and ``num_workers`` are the process's rank in and the size of ``MPI.COMM_WORLD`` (of a
private duplicate, so our messages never meet the user's). As in MXNet 1.9's ``kvstore_dist``:

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
- Copies beside the bare ``Allreduce``: the store keeps its own copy of each key's sum (MXNet
  keeps it on the server), so ``push`` + ``pull`` copy the buffer twice (into the key's buffer,
  back out) and ``pushpull(key, grad)`` in place once (the sum is taken in ``grad`` itself,
  then copied into the key's buffer).
- ``dist_sync`` sums on the host (NumPy), like ``local``. ``dist_device_sync`` sums the local
  list on the device of its first value, like ``device``; with CuPy the buffer goes to MPI
  directly when the MPI library says it is CUDA-aware (``MPIX_Query_cuda_support()``, which
  MPICH and Open MPI export; ``cuda_aware=`` forces the answer), else it is staged through a
  pinned host buffer per key. With NumPy it is ``dist_sync``.
- Stopping: a rank that stops with an error calls ``abort(reason)``, which sends ``reason`` to
  every other rank; a rank waiting in (or reaching) an exchange raises
  :class:`~trainer_run.errors.RunStopped` "rank r stopped: reason" at once. A rank that waits
  longer than ``timeout`` in a sum, broadcast or barrier for the others stops.

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

Gradient compression: ``set_gradient_compression`` is collective: every rank calls it with the
same params before its first push (one 2-value allreduce checks it; a mismatch raises the same
ConfigError on every rank). The local list is summed as without compression, then quantized
on the host with the rank's own residual per key (a device sum is copied to a pinned host
buffer first). Per key, each rank's packed words (``ceil(n / 16)`` uint32) go to every rank
with one ``MPI_Iallgather`` into a buffer kept per key, and every rank dequantizes the ranks'
words and sums them in rank order (rank 0 + rank 1 + ...), so every rank holds the same bytes:
the sum MXNet's server makes from the workers' compressed pushes (it adds them in arrival
order). ``pushpull`` is a compressed push then a pull (MXNet's v1.x
``KVStoreDist::PushPullImpl`` refuses compression instead: "Compression not supported with
PushPull").
"""

from __future__ import annotations

import zlib

import numpy

from ..errors import ConfigError, RunStopped
from . import mpi_job
from .compression import threshold_bits, threshold_from_bits
from .mpi import (
    DEFAULT_TIMEOUT,
    check_timeout,
    dup,
    import_mpi,
    join_job,
    mpi_reports_cuda,
    pinned_empty,
    poll,
)
from .placement import HOST, copy_into, import_cupy, place_of
from .store import KVStore, check_out_dtype

__all__ = ["DistDeviceSyncKVStore", "DistSyncKVStore"]


def _describe(key, value) -> tuple:
    return (key, numpy.dtype(value.dtype).str, tuple(int(n) for n in value.shape))


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
        self.timeout = check_timeout(timeout)
        self._MPI = import_mpi(self.type)
        self._comm = dup(self._MPI, comm, self.timeout, self.type)
        join_job(self._MPI, comm, self.timeout, self.type)
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

    def pushpull(self, key, value, out=None, priority: int = 0, scale: float = 1.0) -> None:
        """A push then a pull, as one exchange. In its in-place form (``out`` None or
        ``value`` itself) each key's single host value is summed over the ranks where it lies
        and the store keeps that array as the key's value, without a copy: MXNet's store keeps
        a single pushed array itself too, so later writes to it show in a later ``pull``."""
        self._usable()
        values = self._checked(key, value, "value")
        outs = values if out is None or out is value else self._checked(key, out, "out")
        for k, arrays in outs.items():
            check_out_dtype(k, arrays[0], self._store[k])
        # (not when the store updates with an optimizer or compresses: those go through _reduce)
        if (outs is values and self._applier is None and self._compression is None
                and scale == 1.0 and self._in_place(values)):
            for k, (array,) in values.items():
                self._exchange(k, array, "sum")
                self._store[k] = array
            return
        super().pushpull(key, value, out=out, priority=priority, scale=scale)

    def _in_place(self, groups: dict) -> bool:
        """Whether every key has one writable C-contiguous host array, none overlapping."""
        arrays = [group[0] for group in groups.values()]
        if any(len(group) != 1 for group in groups.values()) or not all(
                isinstance(a, numpy.ndarray) and self._place(a) is HOST and a.flags.c_contiguous
                and a.flags.writeable for a in arrays):
            return False
        return not any(numpy.may_share_memory(a, b)
                       for i, a in enumerate(arrays) for b in arrays[i + 1:])

    def push(self, key, value, priority: int = 0, scale: float = 1.0) -> None:
        self._usable()
        super().push(key, value, priority=priority, scale=scale)

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
        poll(lambda: self._MPI.Request.Testall(requests), 1.0)  # a dead rank: go on

    def set_gradient_compression(self, compression_params) -> None:
        """Compresses every later push of a float32 key (module docstring). Collective: every
        rank calls it with the same params before its first push; otherwise every rank raises
        the same ConfigError (a rank whose own call is refused raises its own error)."""
        self._usable()
        try:
            gc, refused = self._new_compression(compression_params), None
        except ValueError as e:  # ConfigError too
            gc, refused = None, e
        bits = 0 if gc is None else threshold_bits(gc.threshold)
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
                              f"thresholds, from {threshold_from_bits(low)!r} to "
                              f"{threshold_from_bits(high)!r}; every rank must call "
                              f"set_gradient_compression with the same params")
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
                host = self._host[key] = pinned_empty(buf.shape, buf.dtype)
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
                self._cuda_aware = mpi_reports_cuda()
            if not self._cuda_aware:
                wire = self._host.get(key)
                if wire is None or wire.shape != buf.shape or wire.dtype != buf.dtype:
                    wire = self._host[key] = pinned_empty(buf.shape, buf.dtype)
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
        if poll(lambda: request.Test() or self._aborted(), self.timeout) and self._broken is None:
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


def _pretty(described) -> str:
    return "[" + ", ".join(f"{k!r}: {numpy.dtype(d).name}{list(s)}" for k, d, s in described) + "]"
