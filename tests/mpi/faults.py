"""A fault injected into one rank of a ``trainer-run`` under ``mpiexec``, as a config callback:
``updater.callbacks.update_on_finish={_target_: faults.Fault, rank: 1, at: 12, kind: raise}``
(``tests/mpi`` on ``PYTHONPATH``). MPICH's ``mpiexec`` gives each rank ``PMI_RANK``."""

import errno
import os
import signal
import time


class Fault:
    """At the end of update ``at`` (0-based) on MPI rank ``rank``, once the path ``wait_for``
    (if given) exists: ``kind`` is ``raise`` (a RuntimeError), ``enospc`` (an OSError: no
    space left on the device), or ``sigterm``, ``sigkill`` or ``sigstop`` (sent to the rank
    itself, after writing its pid to ``pid_file`` if given, for the test to clean up)."""

    def __init__(self, rank: int, at: int, kind: str, wait_for: str | None = None,
                 pid_file: str | None = None):
        self.rank, self.at, self.kind, self.wait_for = rank, at, kind, wait_for
        self.pid_file = pid_file

    def __call__(self, iteration: int) -> None:
        if iteration != self.at or int(os.environ.get("PMI_RANK", -1)) != self.rank:
            return
        deadline = time.monotonic() + 30
        while self.wait_for and not os.path.exists(self.wait_for) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.kind == "raise":
            raise RuntimeError(f"injected fault on rank {self.rank} at iteration {iteration}")
        if self.kind == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "injected-fault.bin")
        if self.pid_file:
            with open(self.pid_file, "w") as f:
                f.write(str(os.getpid()))
        os.kill(os.getpid(), getattr(signal, self.kind.upper()))
