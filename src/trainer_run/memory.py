"""The memory rule: an allocation whose size is known before it is made (an array a file's
header declares, a synthetic set's ``size``, a model's parameters) is checked against the
memory the machine has available first, and refused in one line instead of being killed by
the kernel or failing with a traceback.

Available memory is Linux's ``MemAvailable`` (``/proc/meminfo``); where that cannot be read
(another system) the check is skipped.
"""

from __future__ import annotations

from .errors import ConfigError

MEMINFO = "/proc/meminfo"


def available_bytes() -> int | None:
    """The bytes the machine can still allocate without swapping (``MemAvailable``), or None
    where it is not known."""
    try:
        with open(MEMINFO, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def size_text(nbytes: int) -> str:
    """``nbytes`` for a message: ``12.3 GiB``, ``4.0 MiB``, ``512 bytes``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} bytes"


def check_fits(nbytes: int, what: str, fix: str) -> None:
    """Raises :class:`~trainer_run.errors.ConfigError` ``"<what> needs <size> of memory and
    the machine has <size> available; <fix>"`` when ``nbytes`` exceed the available memory
    (never when it is unknown)."""
    available = available_bytes()
    if available is not None and nbytes > available:
        raise ConfigError(f"{what} needs {size_text(nbytes)} of memory and the machine has "
                          f"{size_text(available)} available; {fix}")
