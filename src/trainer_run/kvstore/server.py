"""The server loop of ``dist_async``: the last rank owns the weights and applies every push
as it arrives, alone, with no waiting for other workers; a pull answers the current weights,
and a pushpull answers its push with them once applied.

It answers one message at a time, in arrival order (the layout is :mod:`.wire`'s). Errors
it finds in a worker's push or init are answered on that worker's next pull, barrier or
``close``. While some workers wait in a barrier or ``close``, a worker that has sent nothing
for ``timeout`` is declared stopped (:mod:`.server_clock`): the waiting workers are told so
(they raise RunStopped with its message) and the server raises too; with no worker waiting it
stops after ``timeout`` without any message. An exception of the applier is told to the waiting workers,
answered to every later request, and re-raised once the workers have stopped.

Stopping on a signal: a worker asks with :data:`~.wire.STOP_AT` (its signal, the
iteration it has finished), the server with its own signal (``stop_requested``); from then on
every answer carries the signal, so each worker learns it within an iteration and asks too.
Once every worker has asked (or closed), each is answered with the iteration to stop after:
the furthest any has finished, which the others train on to (-1 when a worker had already
closed: the run goes on to its end).
"""

from __future__ import annotations

import zipfile

import numpy

from ..errors import ConfigError, RunStopped
from . import wire
from .mpi import WAIT_SPIN_S, poll
from .push_compression import WorkerThresholds
from .server_clock import WorkerClock, ranks

__all__ = ["Server"]


class Server:
    """The server loop of a ``dist_async`` store: one message at a time, in arrival order.

    Args:
        MPI: the ``mpi4py.MPI`` module.
        comm: the store's communicator; the workers are its ranks ``0 .. num_workers - 1``.
        num_workers: how many workers there are.
        timeout: seconds to wait for a worker that others wait for (None: forever).
        applier: ``applier(key, grad, weight)``, updating ``weight`` in place, or None; a push
            whose gradient carries a loss scale calls it with ``scale=`` too.
        stop_requested: returns the server process's stop signal, or None (None: it has none).

    Attributes:
        stop_signal: the stop signal asked for so far (0: none).
        agreed: the signal the workers agreed to stop on before their end (0: none).
    """

    def __init__(self, MPI, comm, num_workers: int, timeout, applier, stop_requested=None):
        self.applier = applier
        self.stop_requested = stop_requested
        self.stop_signal = self.agreed = 0
        self.stop_votes: dict = {}  # worker -> the iteration it has finished, asking to stop
        self.MPI, self.comm, self.timeout = MPI, comm, timeout
        self.n = num_workers
        self.clock = WorkerClock(num_workers, timeout)
        self.weights: dict = {}  # code -> array
        self.grads: dict = {}  # code -> receive buffer of a push
        self.compressions = WorkerThresholds()  # compressed pushes: each worker's threshold
        self.names: dict = {}  # code -> str key (str keys only)
        self.declared: dict = {}  # code -> [(worker, dtype, shape)], checked at the barrier
        self.errors: dict = {}  # worker -> (class, message), answered on its next request
        self.waiting: dict = {}  # worker -> "barrier" | "close" | "stop"
        self.stopped: set = set()
        self.active = False  # a worker has called set_optimizer
        self.failure = None  # (exception to raise, message) once the server gives up
        self.h = numpy.zeros(wire.HDR, dtype=numpy.int64)
        self.status = self.MPI.Status()

    def run(self) -> dict:
        """Serves until every worker has stopped; returns the final weights ``{key: array}``
        or raises the failure that made the server give up."""
        MPI, comm, status = self.MPI, self.comm, self.status
        probe = lambda: comm.Iprobe(MPI.ANY_SOURCE, wire.REQ, status)  # noqa: E731
        while not self._finished():
            if poll(probe, self.clock.keepalive, WAIT_SPIN_S):
                source = status.Get_source()
                comm.Recv([self.h, MPI.INT64_T], source, wire.REQ)
                self.clock.heard(source)
                self._handle(source, self.h)
            if not self.stop_signal and self.stop_requested is not None:
                self.stop_signal = self.stop_requested() or 0
            self._check_clock()
        if self.failure is not None:
            raise self.failure[0]
        return {self.names.get(code, code): w for code, w in self.weights.items()}

    def _finished(self) -> bool:
        if self.failure is None:
            return len(self.stopped) == self.n
        # after a failure: until every worker has stopped or gone silent, or none talks
        silent = {w for w in range(self.n) if self.clock.silent(w)}
        return len(self.stopped | silent) == self.n or self.clock.silent()

    # -- messages -------------------------------------------------------------------------------
    def _handle(self, worker, h) -> None:
        kind, code, nbytes = int(h[0]), int(h[1]), int(h[2])
        if kind in wire.WITH_DATA:
            name = self._receive(worker, bytearray(int(h[4]))) if h[4] else None
            data = self._take(worker, kind, code, nbytes, h)
        if kind in (wire.GONE, wire.ABORTED):
            self.stopped.add(worker)
            self.waiting.pop(worker, None)
            if kind == wire.ABORTED:
                self._fail(RunStopped, f"kvstore dist_async: worker {worker} stopped: "
                                       f"{bytes(data).decode(errors='replace')}")
            return
        if self.failure is not None:
            if kind == wire.STOP:
                self.stopped.add(worker)
            if kind in wire.ANSWERED:
                self._answer_error(worker, RunStopped, self.failure[1])
            return
        if kind == wire.INIT:
            self._init(worker, code, data, name)
        elif kind == wire.DECLARE:
            self._declare(worker, code, wire.unpack_meta(h))
        elif kind == wire.PUSH:
            self._push(worker, code, data, wire.scale_of(h))
        elif kind == wire.PULL:
            self._pull(worker, code)
        elif kind == wire.PUSHPULL:
            self._push_pull(worker, code, data, wire.scale_of(h))
        elif kind == wire.OPTIMIZER:
            self._set_optimizer(worker, bytes(data).decode())
        elif kind == wire.COMPRESSION:
            self._set_compression(worker, code)
        elif kind == wire.GET_STATES:
            self._get_states(worker, bool(code))
        elif kind == wire.SET_STATES:
            self._set_states(worker, bytes(data))
        elif kind == wire.BARRIER:
            self.waiting[worker] = "barrier"
            self._release()
        elif kind == wire.STOP:
            self.stopped.add(worker)
            self.waiting[worker] = "close"
            self._release()
        elif kind == wire.STOP_AT:
            self.stop_signal = self.stop_signal or code
            self.stop_votes[worker] = int(h[7])
            self.waiting[worker] = "stop"
            self._release()

    def _take(self, worker, kind, code, nbytes, h):
        """Receives the data message after a header: into the key's push buffer when it fits,
        else into a new array (init) or scratch bytes (to be refused)."""
        push = kind in wire.PUSHES and code in self.grads
        if push and int(h[3]) == wire.PACKED and self.grads[code].dtype == numpy.float32:
            return self._take_packed(worker, code, nbytes)
        if push and self.grads[code].nbytes == nbytes:
            return self._receive(worker, self.grads[code])
        if kind == wire.INIT:
            dtype, shape = wire.unpack_meta(h)
            array = numpy.empty(shape, dtype)
            if array.nbytes == nbytes:
                return self._receive(worker, array)
        return self._receive(worker, bytearray(nbytes))

    def _take_packed(self, worker, code, nbytes):
        """Receives a compressed push and dequantizes it, with the worker's threshold, into
        the key's push buffer (returned); a push the server cannot read is refused."""
        grad = self.grads[code]
        why = self.compressions.refusal(worker, grad.size, nbytes)
        if why is not None:
            self._refuse(worker, ValueError, f"kvstore key {self._key(code)!r}: worker {worker} "
                                             f"pushed 2-bit compressed words, but {why}")
            return self._receive(worker, bytearray(nbytes))
        packed = self._receive(worker, self.compressions.buffer(worker, code, grad.size))
        return self.compressions.dequantize(worker, packed, out=grad)

    def _receive(self, worker, into):
        request = self.comm.Irecv([into, self.MPI.BYTE], worker, wire.REQ_DATA)
        if not poll(request.Test, self.timeout):
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

    def _push(self, worker, code, grad, scale: float) -> None:
        """Applies a push to the key's weights with the applier; a gradient that carries a
        loss ``scale`` has it divided out by the optimizer step (the applier's ``scale``)."""
        key = self._key(code)
        if code not in self.weights:
            self._refuse(worker, ValueError, f"kvstore key {key!r}: push before the server "
                                             f"has it: init {key!r} first")
        elif not self.active or self.applier is None:
            self._refuse(worker, ValueError, "kvstore dist_async: a push reached the server "
                                             "before set_optimizer")
        elif grad is not self.grads[code]:
            self._refuse(worker, ValueError, f"kvstore key {key!r}: pushed {len(grad)} bytes, "
                                             f"the key holds {self.grads[code].nbytes}")
        else:
            try:
                step = {} if scale == 1.0 else {"scale": scale}
                self.applier(key, grad, self.weights[code], **step)
            except Exception as e:
                self._fail(e, f"kvstore dist_async server: the update of key {key!r} pushed by "
                              f"worker {worker} failed: {type(e).__name__}: {e}")

    def _push_pull(self, worker, code, grad, scale: float) -> None:
        """A push, then the answer to a pull of the key (or the failure the push caused)."""
        self._push(worker, code, grad, scale)
        if self.failure is not None:
            self._answer_error(worker, RunStopped, self.failure[1])
        else:
            self._pull(worker, code)

    def _pull(self, worker, code) -> None:
        if worker in self.errors:
            self._answer_error(worker, *self.errors.pop(worker))
        elif code not in self.weights:
            self._answer_error(worker, ValueError, f"kvstore key {self._key(code)!r}: the "
                                                   f"server does not have it: init it first")
        else:
            count = getattr(getattr(self.applier, "optimizer", None), "num_update", None)
            self._answer(worker, wire.OK, code, self.weights[code],
                         count=-1 if count is None else count)

    def _get_states(self, worker, dump_optimizer: bool) -> None:
        if not hasattr(self.applier, "get_states"):
            self._answer_error(worker, ValueError, "kvstore dist_async: the server's applier "
                               "has no get_states, so it cannot give its optimizer states")
            return
        blob = self.applier.get_states(dump_optimizer)
        self._answer(worker, wire.OK, data=numpy.frombuffer(blob, dtype=numpy.uint8))

    def _set_states(self, worker, blob: bytes) -> None:
        """Loads worker's states into the applier; an applier without ``set_states``, or
        states it refuses (another optimizer, other shapes, not our format), are an error."""
        if not hasattr(self.applier, "set_states"):
            self._answer_error(worker, ValueError, "kvstore dist_async: the server's applier "
                               "has no set_states, so it cannot load optimizer states")
            return
        try:
            self.applier.set_states(blob)
        except (ValueError, KeyError, OSError, zipfile.BadZipFile) as e:
            self._answer_error(worker, ValueError, f"kvstore dist_async: the server cannot load "
                                                   f"the optimizer states of worker {worker}: {e}")
            return
        self._answer(worker, wire.OK)

    def _set_compression(self, worker, bits) -> None:
        """Records the worker's threshold (float32 ``bits``); one that differs from another
        worker's is refused."""
        try:
            self.compressions.set(worker, bits)
        except ConfigError as e:
            self._refuse(worker, ConfigError, str(e))

    def _set_optimizer(self, worker, name) -> None:
        if self.applier is None:
            self._answer_error(worker, ConfigError, "kvstore dist_async: set_optimizer, but the "
                               "server was started without an applier: call "
                               "run_server(get_updater(optimizer)) on the last rank with the "
                               "optimizer of the workers' config")
            return
        mine = getattr(self.applier, "optimizer", None)
        if mine is not None and type(mine).__name__.lower() != name:
            self._answer_error(worker, ConfigError, f"kvstore dist_async: worker {worker} sets "
                               f"optimizer {name}, the server's applier runs "
                               f"{type(mine).__name__.lower()}; build both from the same config")
            return
        self.active = True
        self._answer(worker, wire.OK)

    def _release(self) -> None:
        """Answers the barrier when every worker waits in it, and close() when every worker
        has closed; a barrier that a closed worker can never join is an error."""
        barrier = [w for w, why in self.waiting.items() if why == "barrier"]
        if self.stop_votes and len(self.stopped) + len(self.stop_votes) == self.n:
            self._agree()
        if len(self.stopped) == self.n:
            for w in list(self.waiting):
                if w in self.errors:
                    self._answer_error(w, *self.errors.pop(w))
                else:
                    self._answer(w, wire.OK)
            self.waiting.clear()
        elif barrier and self.stopped:
            for w in barrier:
                del self.waiting[w]
                self._answer_error(w, ValueError, f"kvstore dist_async: barrier after worker(s) "
                                   f"{ranks(self.stopped)} closed the store; a barrier "
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
                    self._answer(w, wire.OK)

    def _agree(self) -> None:
        """Answers every worker that asked to stop with the iteration to stop after: the
        furthest any has finished, or -1 when a worker has closed (the run goes to its end)."""
        after = -1 if self.stopped else max(self.stop_votes.values())
        self.agreed = self.stop_signal if after >= 0 else 0
        for w in self.stop_votes:
            del self.waiting[w]
            self._answer(w, wire.OK, stop_after=after)
        self.stop_votes.clear()

    # -- answers, failures, the clock ----------------------------------------------------------
    def _refuse(self, worker, cls, message) -> None:
        """An error for ``worker``, answered on its next pull, barrier or close."""
        self.errors.setdefault(worker, (cls, message))

    def _answer(self, worker, status, code=0, data=None, count: int = -1, stop_after: int = -1) -> None:
        nbytes = 0 if data is None else data.nbytes
        MPI, h = self.MPI, wire.answer_header(status, code, nbytes, count, self.stop_signal, stop_after)
        requests = [self.comm.Isend([h, MPI.INT64_T], worker, wire.REP)]
        if data is not None and data.nbytes:
            requests.append(self.comm.Isend([data, MPI.BYTE], worker, wire.REP_DATA))
        if not poll(lambda: MPI.Request.Testall(requests), self.timeout):
            self._fail(RunStopped, f"kvstore dist_async server: worker {worker} did not take "
                                   f"its answer for {self.timeout:g} s")

    def _answer_error(self, worker, cls, message) -> None:
        text = message.encode()
        MPI, h = self.MPI, wire.error_header(cls, text)
        requests = [self.comm.Isend([h, MPI.INT64_T], worker, wire.REP),
                    self.comm.Isend([text, MPI.BYTE], worker, wire.REP_DATA)]
        poll(lambda: MPI.Request.Testall(requests), self.timeout)  # a dead worker: go on

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
        self.stop_votes.clear()

    def _check_clock(self) -> None:
        """Gives up on a silence the clock says is a failure; else sends the waiting workers
        their keep-alive when one is due."""
        if self.failure is not None:
            return
        failure = self.clock.failure(self.waiting)
        if failure is not None:
            self._fail(RunStopped, failure)
        elif self.waiting and self.clock.keepalive_due():
            for w in self.waiting:
                self._answer(w, wire.ALIVE)

    def _key(self, code):
        return self.names.get(code, code)

