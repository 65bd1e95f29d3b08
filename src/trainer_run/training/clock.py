"""The run's clock: seconds since the run started (the logged ``elapsed_s``).

:func:`job_origin` is the :func:`time.perf_counter` reading at which the job asking for it
started. A job counts from its own start, as Lightning's and Keras's clocks do: a run
started from Python (``trainer_run.train``, a notebook cell) from the moment it is built, so
the time a process (a notebook's kernel) spent before it, idle or on other work, never
enters its logs. The ``trainer-run`` command's process is its job: the command's entry
point calls :func:`from_process_start` first, and its first job counts from the process's
creation (on Linux ``/proc/self/stat``'s start time against the boot clock; elsewhere the
import of this module), so the interpreter's start-up, the imports and Hydra count. A later
job of the same process (a sweep runs its jobs one after another) starts when it asks.
"""

from __future__ import annotations

import os
import time

_IMPORTED = time.perf_counter()
_process_is_the_job = False


def from_process_start() -> None:
    """Makes the process's first job count from the process's start (the command's entry
    point calls it: the command's process is its job)."""
    global _process_is_the_job
    _process_is_the_job = True


def job_origin() -> float:
    """The ``perf_counter`` reading at which this job started (see the module docstring)."""
    global _process_is_the_job
    now = time.perf_counter()
    if not _process_is_the_job:
        return now
    _process_is_the_job = False
    age = process_age()
    return _IMPORTED if age is None else min(now - age, _IMPORTED)


def process_age() -> float | None:
    """Seconds since the operating system created this process, or None where it does not
    say (no ``/proc``, or a clock that disagrees)."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22: starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if age >= 0 else None
