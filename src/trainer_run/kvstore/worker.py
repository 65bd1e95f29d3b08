"""``dist_async``: parameter-server semantics over point-to-point MPI messages.

The *last* rank of ``COMM_WORLD`` is the server; ranks ``0 .. size-2`` are the workers, so a
worker's ``rank`` is its MPI rank and worker 0 is MPI rank 0 (the one that writes progress and
checkpoints). ``num_workers`` counts workers only (``size - 1``; MXNet: the server is not a
worker), and the server's store has ``is_server`` true and ``rank`` None. It needs at least 2
processes.

- The server calls :meth:`DistAsyncKVStore.run_server` with an ``applier(key, grad, weight)``
  that updates ``weight`` in place (``trainer_run.optimizers.get_updater(optimizer)``, the
  optimizer built from the same config as the workers'; MXNet pickles the optimizer to the
  server instead). It owns the weights: rank 0's ``init`` value of each key. It applies every
  push as it arrives, alone, with no waiting for other workers; a ``pull`` answers the
  current weights. It returns ``{key: weights}`` once every worker has called ``close()``.
- Workers: ``init`` (worker 0 sends its value; the others send shape and dtype, which the
  server checks; then a barrier, as MXNet's ``Init``); ``set_optimizer(optimizer)`` (every
  worker, as Gluon does; the server answers whether it has an applier, and whether it is for
  the same optimizer when the applier has an ``optimizer`` attribute); ``push`` (the local sum,
  one message of the whole buffer after a small header; returns once the server has it);
  ``pull`` (a request, then the weights into the key's buffer); ``pushpull`` (per key, a push
  that the server answers with the weights once applied: one round trip);
  ``barrier`` (all workers); ``close`` (a barrier that also stops the server, as MXNet's
  ``barrier_before_exit`` then ``kStopServer``). A worker's pushes and pulls reach the server
  in the order it makes them (MPI does not overtake), so a pull sees that worker's own
  earlier pushes, and whatever other workers' pushes arrived before it. Each pull also
  reports the server optimizer's ``num_update`` (the store's ``num_update``).
- Optimizer states (beyond MXNet, which refuses to save a dist store's):
  ``get_optimizer_states`` / ``set_optimizer_states`` on a worker fetch and load the server
  applier's ``get_states`` / ``set_states`` (the safe ``.npz`` + JSON format; a blob the
  server refuses, a pickle for one, raises ValueError on the worker), and
  ``save_optimizer_states`` / ``load_optimizer_states`` write and read them as files. This is
  how worker 0 puts the server's states into checkpoints and gives them back on resume.
- Stop signals: a stop signal to any process stops every worker after the same iteration
  (:meth:`DistAsyncKVStore.stop_at`). The server learns a worker's signal when it asks to stop,
  its own from ``run_server``'s ``stop_requested``, and reports the first in every answer
  (``stop_signal``), so each worker learns it at its next exchange and asks too.
- Stopping: a worker that stops with an error calls ``abort(reason)``; it tells the server,
  which stops serving and answers every other worker's next request with "worker r stopped:
  reason". A worker stops when the server does not answer for ``timeout``; the server's side
  of the timeout is :mod:`.server_clock`'s, each request and answer :mod:`.server_link`'s.
- MXNet's refusals reproduced: a push before ``set_optimizer`` (MXNet's server stops on
  ``CHECK(updater_)``) and a pull of a key the server has not been given ("init <key>
  first").
- Gradient compression: each worker's ``set_gradient_compression`` sends the threshold to the
  server (MXNet: rank 0 sends ``kSetGradientCompression``; here every worker does, and the
  server refuses a threshold that differs from another worker's). A compressed push sends the
  packed words of the worker's local sum, quantized on the host with its own residual, instead
  of the gradient (the header's dtype field says uint32, see :mod:`.wire`); the server
  dequantizes them into the key's receive buffer with that worker's threshold and applies the
  update as for any push. Errors the server finds are answered on the worker's next pull,
  barrier or ``close``, as for pushes.
"""

from __future__ import annotations

import zlib

import numpy

from ..errors import ConfigError, RunStopped
from . import wire
from .compression import threshold_bits
from .mpi import DEFAULT_TIMEOUT, check_timeout, dup, import_mpi, join_job
from .placement import HOST, copy_into
from .server import Server
from .server_link import ServerLink
from .store import KVStore, check_out_dtype

__all__ = ["DistAsyncKVStore"]


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
        self.timeout = check_timeout(timeout)
        self._MPI = import_mpi(self.type)
        size = (self._MPI.COMM_WORLD if comm is None else comm).Get_size()
        if size < 2:
            raise ConfigError(f"kvstore=dist_async needs at least 2 processes, 1 server and "
                              f"1 worker, got {size}; launch it with e.g. mpiexec -n 3 "
                              f"(the last rank serves, the others are workers)")
        self._comm = dup(self._MPI, comm, self.timeout, self.type)
        join_job(self._MPI, comm, self.timeout, self.type)
        self.server_rank = size - 1
        self.is_server = self._comm.Get_rank() == self.server_rank
        self.rank = None if self.is_server else self._comm.Get_rank()
        self.num_workers = size - 1
        self._link = ServerLink(self._MPI, self._comm, self.server_rank, self.timeout, self.rank)
        self._codes: dict = {}  # key -> its int64 code on the wire
        self._names: dict = {}  # code -> key
        self._optimizer = False
        self._closed = False
        self._agreed: int | None = None
        self.num_update: int | None = None
        """The server optimizer's ``num_update`` at this worker's last pull (None: unknown)."""

    @property
    def stop_signal(self) -> int | None:
        """A worker: the stop signal some process of the job asked for, as the server's last
        answer said (None: none). The server, after :meth:`run_server`: the signal the
        workers agreed to stop on before their end (None: they ran to it)."""
        return self._agreed if self.is_server else self._link.stop_signal

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
                self._link.send(wire.INIT, code, stored, name=name, what=f"the init of key {k!r}")
            else:
                self._link.send(wire.DECLARE, code, meta=stored, what=f"the init of key {k!r}")
        self._link.send(wire.BARRIER, what="the barrier after init")
        self._link.reply("the barrier after init")

    def set_optimizer(self, optimizer) -> None:
        """Lets the server apply pushes (call it on every worker, as Gluon does); the server
        must have been started with an applier for the same optimizer."""
        self._worker("set_optimizer")
        name = numpy.frombuffer(type(optimizer).__name__.lower().encode(), dtype=numpy.uint8)
        self._link.send(wire.OPTIMIZER, data=name, what="set_optimizer")
        self._link.reply("set_optimizer")
        self._optimizer = True

    def push(self, key, value, priority: int = 0, scale: float = 1.0) -> None:
        """Sends the sum of each key's local list to the server, which applies it alone
        (``scale``: see :meth:`.KVStore.push`)."""
        self._worker("push")
        for k, data in self._pushes(key, value):
            self._link.send(wire.PUSH, self._code(k), data, what=f"the push of key {k!r}", scale=scale)

    def set_gradient_compression(self, compression_params) -> None:
        """Compresses this worker's later pushes of float32 keys and tells the server the
        threshold (call it on every worker, with the same params, before its first push).
        The server's refusal, if any, is raised by the next pull, barrier or ``close``."""
        self._worker("set_gradient_compression")
        gc = self._new_compression(compression_params)
        self._link.send(wire.COMPRESSION, threshold_bits(gc.threshold), what="set_gradient_compression")
        self._compression = gc

    def pull(self, key, out=None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Copies the server's current weights of each key into ``out``."""
        self._worker("pull")
        if not ignore_sparse:
            raise ValueError("dist kvstore pull doesn't support ignore_sparse=False")
        if out is None:
            raise ValueError("kvstore pull needs out=: the array(s) to copy the value into")
        self._fetch(self._checked(key, out, "out"))

    def pushpull(self, key, value, out=None, priority: int = 0, scale: float = 1.0) -> None:
        """A push, then a pull into ``out`` (into ``value`` when ``out`` is None), key by key,
        each in one round trip: the server answers the push with the key's weights once it
        has applied it (``scale``: see :meth:`.KVStore.push`)."""
        self._worker("pushpull")
        outs = self._checked(key, value if out is None else out, "out")
        for k, arrays in outs.items():
            check_out_dtype(k, arrays[0], self._store[k])
        for k, data in self._pushes(key, value):
            what = f"the pushpull of key {k!r}"
            self._link.send(wire.PUSHPULL, self._code(k), data, what=what, scale=scale)
            self._receive_weights(k, outs[k], what)

    def barrier(self) -> None:
        """Waits until every worker has called ``barrier`` (the server is no worker)."""
        self._worker("barrier")
        self._link.send(wire.BARRIER, what="the barrier")
        self._link.reply("the barrier")

    def close(self) -> None:
        """Waits for every worker to close, then the server stops; later calls do nothing."""
        if self.is_server or self._closed or self._link.broken is not None:
            return  # a broken store has stopped already
        self._link.send(wire.STOP, what="close()")
        self._link.reply("close()")
        self._closed = True

    def abort(self, reason: str) -> None:
        """Tells the server that this worker stops with ``reason``; the server stops serving
        and every other worker raises RunStopped with it at its next exchange. Does nothing
        on a closed store or one that has stopped already."""
        if self.is_server or self._closed or self._link.broken is not None:
            return
        self._link.broken = f"kvstore dist_async: worker {self.rank} stopped: {reason}"
        text = numpy.frombuffer(reason.encode(), dtype=numpy.uint8)
        try:
            self._link.send(wire.ABORTED, data=text, what="abort")
        except RunStopped:
            pass  # the server is gone: nobody to tell

    def stop_at(self, signum: int, iteration: int) -> int | None:
        """Asks to stop for ``signum`` after ``iteration`` (the one this worker has finished)
        and waits until every worker has asked (each learns of the request at its next
        exchange): returns the iteration after which every worker stops, the furthest any has
        finished, or None when a worker had already closed the store (the run goes on to its
        end)."""
        self._worker("stop_at")
        self._link.send(wire.STOP_AT, signum, iteration=iteration, what="the agreement to stop")
        self._link.reply("the agreement to stop")
        return self._link.stop_after

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The server applier's ``get_states(dump_optimizer)``: its optimizer states in the
        safe format (MXNet refuses to save states of a dist store; here worker 0 checkpoints
        them)."""
        self._worker("get_optimizer_states")
        self._link.send(wire.GET_STATES, int(dump_optimizer), what="get_optimizer_states")
        return bytes(self._link.reply("get_optimizer_states", sized=True))

    def set_optimizer_states(self, blob: bytes) -> None:
        """Loads :meth:`get_optimizer_states` output into the server's applier (its
        ``set_states``); the server's refusal is raised here."""
        self._worker("set_optimizer_states")
        self._link.send(wire.SET_STATES, data=numpy.frombuffer(blob, dtype=numpy.uint8),
                   what="set_optimizer_states")
        self._link.reply("set_optimizer_states")

    def _need_applier(self, verb: str) -> None:
        """The states live on the server, which answers whether it has an applier."""

    def _fetch(self, groups: dict) -> None:
        for k, outs in groups.items():
            what = f"the pull of key {k!r}"
            self._link.send(wire.PULL, self._code(k), what=what)
            self._receive_weights(k, outs, what)

    def _pushes(self, key, value):
        """``(key, data)`` for each key of a push of ``value``, once every check has passed:
        the key's local sum (a lone array of the key's dtype is sent as it is: the send
        completes before the push returns), or its packed words when compressed."""
        groups = self._checked(key, value, "value")
        if not self._optimizer:
            raise ValueError("kvstore dist_async: push before set_optimizer: the server applies "
                             "every push with the optimizer (MXNet's server stops on "
                             "CHECK(updater_)); call set_optimizer(optimizer) on every worker "
                             "first")
        for k, arrays in groups.items():
            if len(arrays) == 1 and _wire_ready(arrays[0], self._store[k]):
                data = arrays[0]
            else:
                data = self._reduce(k, arrays)
            if self._compresses(k):
                data = self._quantized(k, data)  # uint32 words: the header says so
            yield k, data

    def _receive_weights(self, k, outs: list, what: str) -> None:
        """The server's answer to a pull of key ``k``: the weights, straight into ``outs[0]``
        when it can take them as they come, then copied into the other ``outs``; and the
        server optimizer's ``num_update``."""
        into = outs[0] if _wire_ready(outs[0], self._store[k]) else self._store[k]
        self._link.reply(what, into=into)
        self.num_update = self._link.count
        for o in outs:
            if o is not into:
                copy_into(o, into)

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
                             f"cannot {what}; call run_server(applier) there")
        if self._closed:
            raise ValueError(f"kvstore dist_async: {what} after close()")
        self._usable()

    def _usable(self) -> None:
        if self._link.broken is not None:
            raise RunStopped(self._link.broken)

    # -- the server -----------------------------------------------------------------------------
    def run_server(self, applier=None, stop_requested=None) -> dict:
        """Serves the workers until every one has called ``close()``; returns the final
        weights ``{key: array}``. Afterwards :attr:`stop_signal` says whether the workers
        agreed to stop on a signal before their end.

        Args:
            applier: ``applier(key, grad, weight)``, updating ``weight`` in place with the
                optimizer built from the workers' config (e.g.
                ``trainer_run.optimizers.get_updater(optimizer)``). Pushes are refused until
                a worker has called ``set_optimizer``, which is refused without an applier.
            stop_requested: returns this process's stop signal or None, asked after each
                message: a signal the workers then stop on, as on one of theirs.

        Raises:
            RunStopped: a worker stopped talking for ``timeout`` while others waited for it,
                or no worker sent anything for ``timeout``; the waiting workers get the same
                message. An exception of ``applier`` is re-raised once the workers know.
        """
        if not self.is_server:
            raise ValueError(f"kvstore dist_async: run_server on worker {self.rank}: only the "
                             f"last rank ({self.server_rank}) serves")
        if applier is not None and not callable(applier):
            raise TypeError(f"run_server: applier must be callable(key, grad, weight), got "
                            f"{applier!r}")
        if self._closed:
            raise ValueError("kvstore dist_async: run_server after it returned")
        server = Server(self._MPI, self._comm, self.num_workers, self.timeout, applier,
                        stop_requested)
        try:
            return server.run()
        finally:
            self._closed = True
            self._agreed = server.agreed or None


def _wire_ready(array, stored) -> bool:
    """Whether ``array`` can go on the wire, or take an answer, as it is: a C-contiguous host
    NumPy array of the key's dtype (``stored``'s)."""
    return (isinstance(array, numpy.ndarray) and array.dtype == stored.dtype
            and array.flags.c_contiguous)
