"""Compiled loops for fused optimizer steps, when numba is installed.

``pip install trainer-run[fast]`` adds numba. A fused step then runs as one parallel loop
over the flat buffers (each element read and written once), which reaches memory
bandwidth; without numba the NumPy chunked path (:mod:`.workspace`) computes the same
values, operation for operation, so the two paths agree bit for bit. No fast-math flags
are used, so the compiled loops round exactly as NumPy does.

Set ``TRAINER_RUN_JIT=0`` in the environment to use the NumPy path even with numba.
"""

from __future__ import annotations

import os

import numpy

try:
    import numba
except ImportError:  # the optional extra is not installed
    numba = None

ENABLED = numba is not None and os.environ.get("TRAINER_RUN_JIT", "1") != "0"
DTYPES = (numpy.float32, numpy.float64)
PARALLEL_MIN = 1 << 22
"""Buffers this large use every core; smaller ones one (vectorised) thread, which is as fast
while the data fits in cache and does not fight the BLAS threads that just ran backward."""


def kernel(loop, parallel: bool = True):
    """``loop`` compiled with numba, or None without numba. ``parallel`` compiles its
    ``prange`` loops to run on all cores; a function without one (or one called from inside
    another kernel's ``prange``) must be compiled with ``parallel=False``, which numba
    optimises far better there."""
    if numba is None:
        return None
    return numba.njit(parallel=parallel, cache=True)(loop)


def usable(compiled, *arrays) -> bool:
    """Whether ``compiled`` may run on ``arrays``: numba is enabled and they are
    C-contiguous NumPy float32/float64 arrays of one dtype."""
    if not (ENABLED and compiled is not None):
        return False
    first = arrays[0]
    return all(isinstance(a, numpy.ndarray) and a.dtype == first.dtype and a.flags.c_contiguous
               for a in arrays) and first.dtype in DTYPES


def launch(compiled, size: int, *args) -> None:
    """Runs ``compiled(*args)`` on all cores when ``size >= PARALLEL_MIN``, else on one."""
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS if size >= PARALLEL_MIN else 1)
    compiled(*args)


def prange(n):
    """``numba.prange`` inside compiled loops; plain ``range`` when the loop runs as Python."""
    return range(n)


if numba is not None:
    prange = numba.prange  # noqa: F811
