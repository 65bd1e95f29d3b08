"""The BLAS's threads (``backend.threads``): how many threads NumPy's matrix products use.

NumPy hands a matrix product to the BLAS it was built with (OpenBLAS, bundled in NumPy's
wheels as scipy-openblas), which splits the product among its threads; another number of
threads splits it otherwise and rounds the last bits differently. A run resumed with another
count (a SLURM requeue on a node with other cores, a laptop) would then drift from the
uninterrupted run. So the count a run used is recorded in its checkpoints
(:class:`~trainer_run.backend.Backend`'s state) and a resume sets it again.

OpenBLAS is set through its own calls (``openblas_set_num_threads``, named with the prefix and
suffix of NumPy's build, e.g. ``scipy_openblas_set_num_threads64_``), with ctypes, on the
library the process loaded (found in ``/proc/self/maps``, else in NumPy's folder of bundled
libraries): no other package is needed. Where there is none (NumPy built on Apple's
Accelerate or MKL) the count can be neither read nor set: :func:`current` and :func:`use`
give None, and the caller warns.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy

SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
           "openblas_set_num_threads64_", "openblas_set_num_threads")
GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
           "openblas_get_num_threads64_", "openblas_get_num_threads")
"""OpenBLAS's calls by the names its builds give them: NumPy's wheels' scipy-openblas (64-bit
integers), then a plain OpenBLAS."""
MAX_THREADS = 4096
"""The most threads a recorded count may name (a larger one is damage, not a machine)."""


@dataclass(frozen=True)
class _Control:
    path: str
    get: object
    set: object
    initial: int  # the count the process started with (the BLAS's own choice)


def current() -> int | None:
    """The number of threads the BLAS uses now; None where it cannot be asked."""
    control = _control()
    return None if control is None else int(control.get())


def use(count: int) -> int | None:
    """Makes the BLAS use ``count`` threads; the count it uses then (fewer where its build
    takes no more), or None where it cannot be set."""
    control = _control()
    if control is None:
        return None
    control.set(int(count))
    return int(control.get())


def restore() -> None:
    """Back to the count the BLAS chose when the process started (``backend.threads: null``
    after a run of the same process that set another, as in a sweep)."""
    control = _control()
    if control is not None and control.get() != control.initial:
        control.set(control.initial)


def checked(recorded) -> int | None:
    """A count read from a checkpoint (None: none recorded); anything but a whole number from 1
    to :data:`MAX_THREADS` raises ValueError saying so."""
    if recorded is None:
        return None
    if isinstance(recorded, bool) or not isinstance(recorded, int) \
            or not 1 <= recorded <= MAX_THREADS:
        raise ValueError(f"its backend's blas_threads is {recorded!r}, not a number of threads")
    return recorded


def uncontrolled() -> str:
    """Why the count cannot be set, for a warning, and what to do instead."""
    return (f"NumPy's BLAS ({_blas_name()}) offers no call this runner knows to set its threads; "
            "set OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS, MKL_NUM_THREADS) before the command")


def refused(count: int, used: int | None) -> str | None:
    """Why the BLAS does not use ``count`` threads after :func:`use` gave ``used``, for a
    warning; None when it does."""
    if used is None:
        return uncontrolled()
    if used != count:
        return f"NumPy's BLAS ({_blas_name()}) takes at most {used} threads, and uses {used}"
    return None


@functools.lru_cache(maxsize=None)
def _control() -> _Control | None:
    for path in _libraries():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        get = next((getattr(library, n) for n in GETTERS if hasattr(library, n)), None)
        set_ = next((getattr(library, n) for n in SETTERS if hasattr(library, n)), None)
        if get is None or set_ is None:
            continue
        get.restype, get.argtypes = ctypes.c_int, []
        set_.restype, set_.argtypes = None, [ctypes.c_int]
        return _Control(path, get, set_, int(get()))
    return None


def _libraries() -> list[str]:
    """The OpenBLAS libraries NumPy may have loaded: those in this process's memory map first
    (Linux), then those bundled beside NumPy (its wheels' ``numpy.libs``, ``numpy/.dylibs``)."""
    found: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and "openblas" in Path(fields[5].strip()).name.lower():
                    found.append(fields[5].strip())
    except OSError:
        pass
    package = Path(numpy.__file__).parent
    for folder in (package.parent / "numpy.libs", package / ".dylibs"):
        if folder.is_dir():
            found += sorted(str(p) for p in folder.iterdir() if "openblas" in p.name.lower())
    return list(dict.fromkeys(found))


def _blas_name() -> str:
    """The BLAS NumPy's build names (``numpy.show_config``'s), or ``unknown``."""
    try:
        from numpy import __config__ as config

        blas = config.CONFIG["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '')}".strip()
    except (ImportError, AttributeError, KeyError, TypeError):
        return "unknown"
