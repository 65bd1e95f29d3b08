"""A fault injected into one rank of a ``trainer-run`` under ``mpiexec``, as a config callback:
``updater.callbacks.update_on_finish={_target_: faults.Fault, rank: 1, at: 12, kind: raise}``
(``tests/mpi`` on ``PYTHONPATH``). MPICH's ``mpiexec`` gives each rank ``PMI_RANK``."""

import errno
import os
import signal
import time
from pathlib import Path


class Fault:
    """At the end of update ``at`` (0-based) on MPI rank ``rank``, once the path ``wait_for``
    (if given) exists: ``kind`` is ``raise`` (a RuntimeError), ``enospc`` (an OSError: no
    space left on the device), or ``sigterm``, ``sigkill`` or ``sigstop`` (sent to the rank
    itself, or to rank ``to`` of the same job, after writing the pid to ``pid_file`` if
    given, for the test to clean up), or ``sleep`` (the rank sleeps ``seconds``). With ``log``
    (a folder), every rank that calls it writes the number of updates it has made to
    ``<log>/rank<r>`` after each one."""

    def __init__(self, rank: int, at: int, kind: str, wait_for: str | None = None,
                 pid_file: str | None = None, to: int | None = None, log: str | None = None,
                 seconds: float = 0.0):
        self.rank, self.at, self.kind, self.wait_for = rank, at, kind, wait_for
        self.pid_file, self.to, self.log, self.seconds = pid_file, to, log, seconds

    def __call__(self, iteration: int) -> None:
        rank = int(os.environ.get("PMI_RANK", -1))
        if self.log:
            Path(self.log, f"rank{rank}").write_text(str(iteration + 1))
        if iteration != self.at or rank != self.rank:
            return
        deadline = time.monotonic() + 30
        while self.wait_for and not os.path.exists(self.wait_for) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.kind == "sleep":
            time.sleep(self.seconds)
            return
        if self.kind == "raise":
            raise RuntimeError(f"injected fault on rank {self.rank} at iteration {iteration}")
        if self.kind == "enospc":
            time.sleep(self.seconds)  # a write already under way (a checkpoint's) ends first
            os.fsync = _disk_full
            return
        pid = os.getpid() if self.to in (None, rank) else sibling(self.to)
        if self.pid_file:
            with open(self.pid_file, "w") as f:
                f.write(str(pid))
        os.kill(pid, getattr(signal, self.kind.upper()))


def _disk_full(fd: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def sibling(rank: int) -> int:
    """The pid of rank ``rank`` of this job on this host: a child of this process's parent
    (MPICH's proxy) whose ``PMI_RANK`` is ``rank``."""
    parent = os.getppid()
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or _parent(proc) != parent:
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if f"PMI_RANK={rank}".encode() in environ:
            return int(proc.name)
    raise RuntimeError(f"no rank {rank} among the children of process {parent}")


def _parent(proc: Path) -> int:
    """The parent pid in ``proc``'s stat (after the command name, which may hold spaces)."""
    return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
