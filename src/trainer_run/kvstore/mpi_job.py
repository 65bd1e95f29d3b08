"""The ``mpiexec`` job a process belongs to: whether a launcher started it, and how it ends
without waiting forever for a rank that stopped answering.

A process of an MPI job ends with ``MPI_Finalize``, which waits for the other ranks (MPICH 5,
measured: a process exiting normally while another rank is stopped by SIGSTOP never ends,
and neither does ``mpiexec``). ``mpiexec`` (MPICH's Hydra, measured) exits with the bitwise
OR of the ranks' exit statuses (1 and 2 give 3); it ends the whole job at once when a rank
is killed by a signal (its status is then the signal's number, 9 for SIGKILL), exits
without ``MPI_Finalize``, or calls ``MPI_Abort(code)`` (its status is then ``code``).

The dist kvstores of :mod:`.dist` take part: the first one a process builds gives this
module a communicator of its own (:func:`join`), and a store that stops waiting for a rank
that does not answer says so (:func:`give_up`). The command runs inside :func:`ending`,
which ends a process that built a dist store as :func:`end` says, so that a job never
outlives its report by more than the kvstore's timeout, and ends with one exit status.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import time
import traceback

import numpy

__all__ = ["end", "ending", "give_up", "join", "joined", "launched"]

LAUNCHER_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")
"""Environment variables a launcher sets in each rank (MPICH's Hydra, PMIx, Open MPI)."""

_job: dict = {"MPI": None, "comm": None, "timeout": None, "gave_up": False}


def launched() -> bool:
    """Whether an MPI launcher (``mpiexec``, ``mpirun``, ``srun``) started this process."""
    return any(name in os.environ for name in LAUNCHER_VARIABLES)


def joined() -> bool:
    """Whether a dist store of this process has called :func:`join`."""
    return _job["comm"] is not None


def join(MPI, comm, timeout: float | None) -> None:
    """Takes ``comm``, a communicator no store uses (every rank gives its own duplicate, in
    the same order), for the job's last exchange, which waits ``timeout`` seconds (None:
    forever) for the other ranks. Later calls are ignored: the first store's comm is kept."""
    if _job["comm"] is None:
        _job.update(MPI=MPI, comm=comm, timeout=timeout)


def give_up(MPI) -> None:
    """Records that this process stopped waiting for a rank that did not answer within the
    kvstore's timeout (the rank is stuck, stopped or gone)."""
    _job["gave_up"] = True
    _job["MPI"] = _job["MPI"] or MPI


def end(status: int) -> int:
    """The exit status this process ends with, when it would end with ``status``; it does not
    return when it aborts the job instead.

    - No dist store was built, nor given up on a rank: ``status``.
    - This process gave up on a rank that does not answer, and it is rank 0 (the only rank
      that writes: it has written and reported everything) or has no store to meet the
      others through: it aborts the job at once, ``MPI_Abort(status)``; ``mpiexec`` ends
      every rank and exits with ``status``.
    - Otherwise every rank meets the others in one last exchange, the largest of their
      statuses, and ends with it (so ``mpiexec`` exits with it: 4 for a disk that refused
      rank 0's write rather than 4 | 1 = 5 with the other ranks' 1); a rank that has not
      come after the kvstore's timeout (stuck, or gone without ending here) makes the
      waiting ranks abort the job with their own status.
    """
    MPI, comm = _job["MPI"], _job["comm"]
    if MPI is None or comm is None and not _job["gave_up"]:  # no store to meet the others through
        return status
    if _job["gave_up"] and (comm is None or comm.Get_rank() == 0):
        _abort(status)
    statuses = numpy.array([status], dtype=numpy.int64)
    request = comm.Iallreduce(MPI.IN_PLACE, statuses, op=MPI.MAX)
    timeout = _job["timeout"]
    deadline = None if timeout is None else time.monotonic() + timeout
    while not request.Test():
        if deadline is not None and time.monotonic() >= deadline:
            _abort(status)
        time.sleep(1e-3)
    return int(statuses[0])


ABORT_GRACE_S = 5.0
"""How long ``MPI_Abort`` may take before this process ends itself, with status 1."""


def _abort(status: int) -> None:
    """Flushes this process's output, then ends every rank of the job with ``MPI_Abort``
    (it does not return): ``mpiexec`` exits with ``status`` (MPICH prints one
    ``Abort(status) ...`` line). ``MPI_Abort`` can spin, holding the GIL, on a host that has
    dropped off the network (MPICH 5 over TCP, measured: still running after 30 s); after
    :data:`ABORT_GRACE_S` a watchdog outside the interpreter (``faulthandler``'s) ends the
    process with status 1 (everything has been written and reported)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _job["devnull"] = open(os.devnull, "w")  # noqa: SIM115  (faulthandler writes there until the end)
    faulthandler.dump_traceback_later(ABORT_GRACE_S, file=_job["devnull"], exit=True)
    comm = _job["comm"] if _job["comm"] is not None else _job["MPI"].COMM_WORLD
    comm.Abort(status)


@contextlib.contextmanager
def ending():
    """Runs the command inside; then, in a process that built a dist store, ends it as
    :func:`end` says, with the status the command would exit with: 0 when it returns, its
    ``SystemExit`` status, or 1 for an exception, whose traceback is printed first (as Python
    would, but before the job may be aborted). Elsewhere nothing changes."""
    error = None
    try:
        yield
        status = 0
    except SystemExit as e:
        error, status = e, _status(e.code)
    except BaseException as e:
        if _job["MPI"] is None:
            raise
        traceback.print_exception(e)
        status = 130 if isinstance(e, KeyboardInterrupt) else 1
    final = end(status)
    if error is not None and final == status:
        raise error
    if final or status:
        raise SystemExit(final)


def _status(code) -> int:
    """The process exit status of ``sys.exit(code)``."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1
