"""The job's clock: seconds since the job started, start-up included (the logged ``elapsed_s``).

:func:`job_origin` is the :func:`time.perf_counter` reading at which the job started. The
first job of a process started with the process: on Linux its creation time
(``/proc/self/stat``'s start time against the boot clock), so the interpreter's start-up and
the imports count; elsewhere the import of this module. A later job of the same process (a
sweep runs its jobs one after another) starts when it asks.
"""

from __future__ import annotations

import os
import time

_IMPORTED = time.perf_counter()
_claimed = False


def job_origin() -> float:
    """The ``perf_counter`` reading at which this job started (see the module docstring)."""
    global _claimed
    now = time.perf_counter()
    if _claimed:
        return now
    _claimed = True
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
