"""A ``dist_async`` worker's exchange with the server (the transport of :mod:`.worker`).

A request is a header (:func:`.wire.pack_request`), then the key's name and the data as raw
bytes; :meth:`ServerLink.send` returns once the server has taken them. An answer is a header,
then its data or, for an error, its text: :meth:`ServerLink.reply` waits for it (the server's
keep-alives restart the clock) and raises an error answer as its class. Each answer says
which stop signal some process of the job has asked for (:attr:`ServerLink.stop_signal`).
A link that waited ``timeout`` for the server, or was told that the server gave up, is
broken: :attr:`ServerLink.broken` holds the message every later call raises.
"""

from __future__ import annotations

import numpy

from ..errors import RunStopped
from . import mpi_job, wire
from .mpi import WAIT_SPIN_S, poll

__all__ = ["ServerLink"]


class ServerLink:
    """Worker ``rank``'s requests to the server at ``server_rank`` of ``comm`` and its answers,
    each waited for at most ``timeout`` seconds (None: forever)."""

    def __init__(self, MPI, comm, server_rank: int, timeout: float | None, rank: int | None):
        self.MPI, self.comm, self.server_rank = MPI, comm, server_rank
        self.timeout, self.rank = timeout, rank
        self.out = numpy.zeros(wire.HDR, dtype=numpy.int64)  # outgoing header, reused
        self.answer = numpy.zeros(wire.HDR, dtype=numpy.int64)  # the last answer's header
        self.broken: str | None = None
        self.stop_signal: int | None = None

    @property
    def count(self) -> int | None:
        """The server optimizer's ``num_update`` the last answer carried (None: unknown)."""
        count = int(self.answer[6])
        return count if count >= 0 else None

    @property
    def stop_after(self) -> int | None:
        """The iteration to stop after that the last answer carried (None: none)."""
        after = int(self.answer[8])
        return after if after >= 0 else None

    def send(self, kind, code=0, data=None, *, meta=None, name=b"", what: str,
             iteration: int = 0, scale: float = 1.0) -> None:
        """Sends a header (and ``name``, then ``data``, as raw bytes) to the server and waits
        until it has taken them."""
        MPI, h = self.MPI, self.out
        wire.pack_request(h, kind, code, data, meta, name, what, iteration, scale)
        requests = [self.comm.Isend([h, MPI.INT64_T], self.server_rank, wire.REQ)]
        if name:
            requests.append(self.comm.Isend([name, MPI.BYTE], self.server_rank, wire.REQ_DATA))
        if data is not None:
            requests.append(self.comm.Isend([data, MPI.BYTE], self.server_rank, wire.REQ_DATA))
        if not poll(lambda: MPI.Request.Testall(requests), self.timeout):
            self.give_up(what)

    def reply(self, what: str, into=None, sized: bool = False):
        """Waits for the server's answer (its keep-alives restart the clock); the data goes
        into ``into``, or with ``sized`` into a new bytearray of the size announced, which is
        returned; an error answer is raised here."""
        MPI, h = self.MPI, self.answer
        while True:
            request = self.comm.Irecv([h, MPI.INT64_T], self.server_rank, wire.REP)
            if not poll(request.Test, self.timeout, WAIT_SPIN_S):
                request.Cancel()
                self.give_up(what)
            if h[0] != wire.ALIVE:
                break
        status, nbytes, error = int(h[0]), int(h[2]), int(h[3])
        if status == wire.OK and h[7]:
            self.stop_signal = int(h[7])
        if status == wire.ERROR:
            self._raise(what, error, nbytes)
        if sized:
            into = numpy.empty(nbytes, dtype=numpy.uint8)
        if nbytes:
            if into is None or into.nbytes != nbytes:
                self.broken = (f"kvstore dist_async: rank {self.rank}: the server answered "
                               f"{what} with {nbytes} bytes, expected "
                               f"{0 if into is None else into.nbytes}")
                raise RunStopped(self.broken)
            request = self.comm.Irecv([into, MPI.BYTE], self.server_rank, wire.REP_DATA)
            if not poll(request.Test, self.timeout):
                self.give_up(what)
        return into

    def _raise(self, what: str, error: int, nbytes: int):
        """Raises the error answer whose text (``nbytes``) follows; a RunStopped one breaks
        the link, and the server is told this worker has stopped too (except in close())."""
        text = bytearray(nbytes)
        request = self.comm.Irecv([text, self.MPI.BYTE], self.server_rank, wire.REP_DATA)
        if not poll(request.Test, self.timeout):
            self.give_up(what)
        cls = wire.error_class(error)
        message = text.decode(errors="replace")
        if cls is RunStopped:
            self.broken = message
            if what != "close()":
                self._gone()
        raise cls(message)

    def _gone(self) -> None:
        """Tells a server that gave up that this worker has stopped too (no answer comes)."""
        h = self.out
        wire.pack_request(h, wire.GONE)
        request = self.comm.Isend([h, self.MPI.INT64_T], self.server_rank, wire.REQ)
        poll(request.Test, 1.0)

    def give_up(self, what: str):
        """Breaks the link after ``timeout`` without the server in ``what``, and raises."""
        mpi_job.give_up(self.MPI)
        self.broken = (f"kvstore dist_async: worker {self.rank} got no answer from the server "
                       f"(rank {self.server_rank}) for {self.timeout:g} s in {what}; the "
                       f"server has stopped (crashed, or gave up on another worker) or is stuck")
        raise RunStopped(self.broken)
