"""When the ``dist_async`` server last heard from each worker, and what the silence means
(the clock of :mod:`.server`).

Every request restarts its worker's clock (:meth:`WorkerClock.heard`). While some workers
wait in a barrier, ``close`` or the agreement to stop, a worker that has sent nothing for
``timeout`` is declared stopped (:meth:`WorkerClock.failure` says so in one message); with no
worker waiting, the server stops once no worker at all has sent anything for ``timeout``. The
waiting workers are sent a keep-alive every ``keepalive`` seconds (a quarter of ``timeout``,
at most 5 s), which restarts their own clock of the server.
"""

from __future__ import annotations

import time

__all__ = ["WorkerClock", "ranks"]

WAITS = {"barrier": "barrier", "close": "close()", "stop": "the agreement to stop"}
"""What a waiting worker waits in, as the messages say it."""


class WorkerClock:
    """The time each of ``num_workers`` workers last sent something, against ``timeout``
    (seconds; None: a silence never counts)."""

    def __init__(self, num_workers: int, timeout: float | None):
        self.timeout = timeout
        self.keepalive = 5.0 if timeout is None else min(timeout / 4, 5.0)
        now = time.monotonic()
        self.last_seen = [now] * num_workers
        self.last_any = self.last_alive = now

    def heard(self, worker: int) -> None:
        """``worker`` has just sent a request."""
        self.last_seen[worker] = self.last_any = time.monotonic()

    def silent(self, worker: int | None = None) -> bool:
        """Whether ``worker`` (None: every worker) has sent nothing for ``timeout``."""
        if self.timeout is None:
            return False
        last = self.last_any if worker is None else self.last_seen[worker]
        return time.monotonic() - last >= self.timeout

    def failure(self, waiting: dict) -> str | None:
        """Why the server gives up, given ``waiting`` (worker -> what it waits in: a key of
        :data:`WAITS`), or None while no silence has lasted ``timeout``: a worker the waiting
        ones wait for is silent, or, with none waiting, every worker is."""
        if self.timeout is None:
            return None
        if not waiting:
            if not self.silent():
                return None
            return (f"kvstore dist_async server: no worker sent anything for {self.timeout:g} s; "
                    f"the workers have stopped (crashed, or exited without close()) or are stuck")
        dead = [w for w in range(len(self.last_seen)) if w not in waiting and self.silent(w)]
        if not dead:
            return None
        why = " and ".join(sorted({WAITS[why] for why in waiting.values()}))
        return (f"kvstore dist_async server: worker(s) {ranks(dead)} sent nothing for "
                f"{self.timeout:g} s while worker(s) {ranks(waiting)} waited for them in {why}; "
                f"a worker has stopped (crashed, or exited without close()) or is stuck")

    def keepalive_due(self) -> bool:
        """Whether a keep-alive is due to the waiting workers (the clock then restarts); never
        without a ``timeout``, as the workers then wait for the server forever."""
        now = time.monotonic()
        if self.timeout is None:
            return False
        if now - self.last_alive < self.keepalive:
            return False
        self.last_alive = now
        return True


def ranks(workers) -> str:
    """``workers`` as the messages list them: ``0, 2``."""
    return ", ".join(str(r) for r in sorted(workers))
