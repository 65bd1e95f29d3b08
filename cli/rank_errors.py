"""One ``error:`` line per job, not one per rank: the processes of an ``mpiexec`` job agree
who prints an error.

The ranks of a job mostly fail together and alike (a config mistake each finds, or one that
rank 0 decided for all): the user should read it once. But a rank may also fail alone (a file
its host lacks), and then its line must not be lost. So a failing rank other than 0 sends its
line to rank 0 and waits up to :data:`ACK_S` for rank 0 to take it; rank 0, failing, prints
its own line, then for :data:`GATHER_S` takes the lines of the ranks that fail with it and
prints each that differs from its own once, ``rank N:`` first. A line rank 0 does not take in
time (rank 0 is training, or failed earlier) is printed by its own rank, ``rank N:`` first;
rank 0 leaves out a line sent more than :data:`FRESH_S` before it takes it (by the hosts'
clocks), which its rank has printed itself. A line is never lost; with clocks more than
``ACK_S - FRESH_S`` apart it may be printed twice.

The exchange runs on MPI's world communicator with a tag of its own, only in a process that
has initialized MPI (a ``kvstore=dist_*`` job); anywhere else every process prints its line.
"""

from __future__ import annotations

import sys
import time

TAG = 0x7E44
"""The tag of the error lines and their acknowledgements."""
GATHER_S = 1.0
"""How long rank 0 takes the lines of ranks that fail with it."""
ACK_S = 3.0
"""How long a rank other than 0 waits for rank 0 to take its line."""
FRESH_S = ACK_S - 1.0
"""The age past which rank 0 leaves out a line: its rank has given up waiting, or soon will."""
POLL_S = 0.01


def lines_to_print(line: str) -> list[str]:
    """The lines this process prints for its error ``line`` (see the module docstring)."""
    world = _world()
    if world is None or world.Get_size() < 2:
        return [line]
    if world.Get_rank() == 0:
        return [line, *(f"rank {rank}: {other}" for rank, other in _gathered(world)
                        if other != line)]
    return [] if _taken(world, line) else [f"rank {world.Get_rank()}: {line}"]


def _world():
    """MPI's world communicator when this process has initialized MPI, else None."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None or not MPI.Is_initialized() or MPI.Is_finalized():
        return None
    return MPI.COMM_WORLD


def _gathered(world) -> list[tuple[int, str]]:
    """The lines other ranks send within :data:`GATHER_S` (those sent within :data:`FRESH_S`),
    each acknowledged."""
    MPI = sys.modules["mpi4py.MPI"]
    found: dict[int, str] = {}
    deadline = time.monotonic() + GATHER_S
    while time.monotonic() < deadline and len(found) < world.Get_size() - 1:
        status = MPI.Status()
        if world.Iprobe(source=MPI.ANY_SOURCE, tag=TAG, status=status):
            rank = status.Get_source()
            line, sent = world.recv(source=rank, tag=TAG)
            if time.time() - sent < FRESH_S:
                world.send(True, dest=rank, tag=TAG)
                found[rank] = line
        else:
            time.sleep(POLL_S)
    return sorted(found.items())


def _taken(world, line: str) -> bool:
    """Sends ``line`` to rank 0; whether rank 0 took it within :data:`ACK_S`."""
    sent = world.isend((line, time.time()), dest=0, tag=TAG)
    reply = world.irecv(source=0, tag=TAG)
    deadline = time.monotonic() + ACK_S
    taken = False
    while not taken and time.monotonic() < deadline:
        taken = reply.test()[0]
        time.sleep(0 if taken else POLL_S)
    for request in (sent, reply):  # each completed or cancelled, so that MPI may finalize
        if not request.test()[0]:
            request.Cancel()
            request.wait()
    return taken
