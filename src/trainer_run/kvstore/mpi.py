"""The MPI plumbing of the dist kvstores: mpi4py imported when a store is built, a private
communicator per store, waits that poll an MPI request until a deadline, and the buffers a
device array is staged through when the MPI library cannot read device memory.

mpi4py is imported only by :func:`import_mpi`, so the kvstore package imports without it; a
missing mpi4py or MPI is a :class:`~trainer_run.errors.ConfigError` that says how to install
them. No wait is unbounded unless its timeout is None: :func:`poll` gives up after the timeout,
and the store that called it raises :class:`~trainer_run.errors.RunStopped`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time

import numpy

from ..errors import ConfigError, RunStopped, check_number
from . import mpi_job, shm_leftovers

__all__ = ["DEFAULT_TIMEOUT", "MAX_SLEEP_S", "SPIN_S", "WAIT_SPIN_S", "check_timeout", "dup", "import_mpi",
           "join_job", "mpi_reports_cuda", "pinned_empty", "poll"]

DEFAULT_TIMEOUT = 60.0
"""Seconds any exchange waits for the other ranks before raising RunStopped."""

SPIN_S = 1e-3
"""Seconds :func:`poll` calls its test back to back before it sleeps: a message under way (a
large one goes in pieces, each side copying in turn) completes within it."""
WAIT_SPIN_S = 5e-5
"""The spin of a wait for a rank that is still computing (a ``dist_async`` server waiting for
the next request, a worker for the answer to its push): it sleeps almost at once."""
MAX_SLEEP_S = 1e-3
"""The longest sleep between two calls of :func:`poll`'s test."""


def poll(test, timeout, spin_s: float = SPIN_S) -> bool:
    """Calls ``test()`` until it returns true (then True) or ``timeout`` seconds pass (False;
    None waits forever).

    MPI makes progress only inside ``test`` (``MPI_Test``, ``MPI_Iprobe``), so it is called
    back to back for ``spin_s``, then with sleeps in between that start at 10 us and double
    up to :data:`MAX_SLEEP_S`. A process that waits for a rank still computing thus leaves
    the core to it: with more ranks than cores (a ``dist_async`` server beside its workers),
    a waiting rank that spins or only yields the core takes the CPU time of the rank it
    waits for."""
    if test():
        return True
    start = time.monotonic()
    while time.monotonic() - start < spin_s:
        if test():
            return True
    delay = 1e-5
    while True:
        time.sleep(delay)
        if test():
            return True
        if timeout is not None and time.monotonic() - start >= timeout:
            return False
        delay = min(2 * delay, MAX_SLEEP_S)


def check_timeout(timeout):
    """``timeout`` as a number of seconds > 0, or None (wait forever); ConfigError otherwise."""
    if timeout is None:
        return None
    return check_number("kvstore timeout", timeout, low=0, low_open=True)


def import_mpi(type_name: str):
    """The ``mpi4py.MPI`` module; ConfigError naming kvstore ``type_name`` and how to install
    mpi4py when it or its MPI library is missing."""
    shm_leftovers.remove()
    try:
        from mpi4py import MPI
    except ImportError:
        raise ConfigError(f"kvstore={type_name} needs mpi4py and an MPI; install them with "
                          f"pip install 'trainer-run[mpi]'") from None
    except (OSError, RuntimeError) as e:  # mpi4py found no MPI library to load
        raise ConfigError(f"kvstore={type_name} needs mpi4py and an MPI; install them with "
                          f"pip install 'trainer-run[mpi]' ({e})") from None
    return MPI


def dup(MPI, comm, timeout, type_name):
    """A private duplicate of ``comm`` (``MPI_Comm_idup``, collective), within ``timeout``."""
    comm = MPI.COMM_WORLD if comm is None else comm
    new, request = comm.Idup()
    if not poll(request.Test, timeout):
        mpi_job.give_up(MPI)
        raise RunStopped(f"kvstore {type_name}: rank {comm.Get_rank()} waited {timeout:g} s for "
                         f"the other {comm.Get_size() - 1} rank(s) to create the store; a rank "
                         f"has stopped or does not create it")
    return new


def join_job(MPI, comm, timeout, type_name) -> None:
    """The first dist store of the process gives :mod:`.mpi_job` a duplicate of ``comm`` of
    its own, for the job's last exchange when the command ends."""
    if not mpi_job.joined():
        mpi_job.join(MPI, dup(MPI, comm, timeout, type_name), timeout)


def mpi_reports_cuda() -> bool:
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


def pinned_empty(shape, dtype):
    """An uninitialised host array in pinned (page-locked) memory when CuPy is installed, for
    staging a device buffer; a plain NumPy array otherwise."""
    try:
        import cupyx

        return cupyx.empty_pinned(shape, dtype)
    except (ImportError, AttributeError):
        return numpy.empty(shape, dtype)
