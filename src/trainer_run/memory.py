"""The memory rule: an allocation whose size is known before it is made (an array a file's
header declares, a synthetic set's ``size``, a model's parameters) is checked against the
memory the machine has available first, and refused in one line instead of being killed by
the kernel or failing with a traceback.

An allocation whose size only the model's code knows (its activations, the optimizer's
states) is bounded by :func:`limit_to_available`: the process's data limit becomes what it
uses plus what the machine has available, so such an allocation fails with MemoryError,
which the command reports in one line (:func:`out_of_memory`), instead of the kernel killing
the process once memory runs out.

:func:`reuse_freed_blocks` makes a training process keep the large blocks it frees for its next
allocations instead of giving them back to the kernel.

Available memory is Linux's ``MemAvailable`` (``/proc/meminfo``); where that cannot be read
(another system) the check is skipped.
"""

from __future__ import annotations

import contextlib
from typing import Callable

from .errors import ConfigError

MEMINFO = "/proc/meminfo"
STATUS = "/proc/self/status"
LOWER = "lower dataset.batch_size or the model's sizes (model.hidden_sizes, model.channels)"
"""What to change when a run needs more memory than the machine has."""


def available_bytes() -> int | None:
    """The bytes the machine can still allocate without swapping (``MemAvailable``), or None
    where it is not known."""
    return _kibibytes(MEMINFO, "MemAvailable:")


def _kibibytes(path: str, field: str) -> int | None:
    """The bytes of ``field`` (given in kB) in the ``/proc`` file ``path``, or None."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def limit_to_available() -> Callable[[], None]:
    """Lets this process allocate what it holds now plus the machine's available memory, and
    no more: its data limit (``RLIMIT_DATA``, which bounds its heap and private writable
    mappings, where arrays live; not the files it maps read-only) is set to its data size
    (``VmData``) plus ``MemAvailable``, so a larger allocation raises MemoryError. Returns
    the function that restores the previous limit; changes nothing where either size is
    unknown or the limit is that low already."""
    try:
        import resource
    except ImportError:  # not a Unix
        return lambda: None
    available, used = available_bytes(), _kibibytes(STATUS, "VmData:")
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if available is None or used is None:
        return lambda: None
    limit = used + available
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        return lambda: None
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return lambda: resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


KEPT_BLOCK = 1 << 30
"""Freed blocks up to this size stay in the process for reuse (:func:`reuse_freed_blocks`)."""


def reuse_freed_blocks() -> bool:
    """Makes glibc's allocator serve blocks up to :data:`KEPT_BLOCK` from its heap, and keep up
    to 2 GiB free at the heap's top, instead of mapping each large block on its own and
    unmapping it when freed (``mallopt``'s ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD``).

    A training step frees and allocates arrays of the same sizes every iteration (activations,
    im2col columns, gradients). Mapped on their own, each allocation's pages are faulted in
    again by the kernel, zeroed, on first touch, which can cost more than the arithmetic on
    them; kept, the next iteration reuses them. The process's resident size stays at its peak
    rather than falling between iterations. Returns whether the setting was made (False
    outside glibc)."""
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols, libc's among them
    except (OSError, AttributeError):  # no mallopt (not glibc)
        return False
    global _kept
    _kept = bool(mallopt(M_MMAP_THRESHOLD, KEPT_BLOCK) and mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1))
    return _kept


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""``mallopt``'s parameters (glibc's ``malloc.h``)."""
STREAMED_BLOCK = 128 << 10
"""glibc's default threshold above which a block is mapped on its own."""
_kept = False


@contextlib.contextmanager
def blocks_returned():
    """While a pass streams a large file (a corpus tokenized a megabyte at a time), blocks above
    :data:`STREAMED_BLOCK` are mapped on their own and given back when freed, as glibc does by
    default: chunks of varying sizes kept by :func:`reuse_freed_blocks` would fragment the heap
    and hold a third of a gigabyte's corpus after it. After the pass the training setting is
    back. Does nothing unless :func:`reuse_freed_blocks` made it."""
    if not _kept:
        yield
        return
    import ctypes
    mallopt = ctypes.CDLL(None).mallopt
    mallopt(M_MMAP_THRESHOLD, STREAMED_BLOCK)
    try:
        yield
    finally:
        mallopt(M_MMAP_THRESHOLD, KEPT_BLOCK)


def out_of_memory(error: MemoryError) -> str:
    """The one line for an allocation refused by :func:`limit_to_available` (NumPy's message
    names the array's size, shape and dtype)."""
    what = str(error) or "an allocation failed"
    return (f"out of memory: {what[0].lower()}{what[1:]}; the run needs more memory than the "
            f"machine had available when it started: {LOWER}")


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
