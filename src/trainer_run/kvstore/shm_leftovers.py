"""MPICH's shared-memory segments that a killed job left in ``/dev/shm``, removed before MPI
starts.

MPICH 4 and 5 give the ranks of a job on one node a segment named after the job
(``mpich_shm_<job>_<node>``, ``mpich_vci_<job>_<node>``) that the first rank to open it
creates and the others attach to, and that ``MPI_Finalize`` removes. A job whose ranks are
killed leaves it behind. Under SLURM the job's name is its job and step id, which a requeued
job has again: its ranks would attach to the dead job's segment and fail in ``MPI_Init``
(UCX's ``failed to unpack address``) or wait there. So before this process initialises MPI,
:func:`remove` deletes the segments of this user that no process has open or mapped. A
segment in use is always open or mapped from its creation on, and the files are listed
before the processes are read, so a segment another rank creates meanwhile is kept.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

FOLDER = Path("/dev/shm")
PATTERNS = ("mpich_shm_*", "mpich_vci_*")


def remove(folder: Path = FOLDER, patterns=PATTERNS) -> list[Path]:
    """Deletes the files of ``folder`` matching ``patterns`` that this user owns and no process
    has open or mapped (nothing once this process has imported mpi4py's MPI); returns them."""
    if "mpi4py.MPI" in sys.modules:
        return []
    uid = os.geteuid()
    candidates = []
    for pattern in patterns:
        for path in folder.glob(pattern):
            try:
                if path.stat().st_uid == uid:
                    candidates.append(path)
            except OSError:
                continue
    if not candidates:
        return []
    in_use = _open_or_mapped(str(folder))
    removed = []
    for path in candidates:
        if str(path) in in_use:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


def _open_or_mapped(prefix: str) -> set[str]:
    """The paths under ``prefix`` that a process this user can read has open or mapped."""
    found: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):  # closed meanwhile
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith(prefix):
                        found.add(target)
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    fields = line.split(maxsplit=5)
                    if len(fields) == 6 and fields[5].startswith(prefix):
                        found.add(fields[5].rstrip("\n").removesuffix(" (deleted)"))
        except OSError:  # gone, or another user's
            continue
    return found
