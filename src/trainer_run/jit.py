"""Compiled loops, when numba is installed: fused optimizer steps and the scatter loops of
convolution, pooling and batch normalization.

``pip install trainer-run[fast]`` adds numba. A fused step then runs as one parallel loop
over the flat buffers (each element read and written once), which reaches memory
bandwidth; without numba the NumPy path (:mod:`trainer_run.optimizers.workspace`, the
functions' own array code) computes the same values, operation for operation, so the two
paths agree bit for bit. No fast-math flags are used, so the compiled loops round exactly
as NumPy does.

numba is imported lazily: importing the optimizers does not import it. :func:`kernel`
returns a :class:`Kernel` that imports numba and compiles (with the on-disk cache) when it
is first called, so the first fused step of a process pays numba's import. Kernels may call
other kernels and :func:`prange`; both are resolved to their compiled forms when the
calling kernel is compiled.

Set ``TRAINER_RUN_JIT=0`` in the environment to use the NumPy path even with numba.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.util
import os
import threading
import types

import numpy

AVAILABLE = importlib.util.find_spec("numba") is not None
"""Whether numba is installed (found without importing it)."""
ENABLED = AVAILABLE and os.environ.get("TRAINER_RUN_JIT", "1") != "0"
DTYPES = (numpy.float32, numpy.float64)
COMPILED_MIN = 1 << 16
"""Buffers smaller than this take the NumPy path: a step on them costs microseconds either
way, while the first compiled step of a process costs numba's import and the loading of its
kernels, most of a second. A run whose groups are all this small never imports numba."""
PARALLEL_MIN = 1 << 22
"""Work this large (elements of one launch) uses every core; smaller runs on one
(vectorised) thread, which is as fast while the data fits in cache and does not fight the
BLAS threads that just ran backward."""


@functools.cache
def numba():
    """The numba module, imported on first use.

    Sets ``OMP_WAIT_POLICY=PASSIVE`` first unless the environment sets it: numba's OpenMP
    threads then sleep between compiled loops rather than spin. Where more threads are busy
    than there are cores (other processes, BLAS), a spinning barrier holds every parallel
    loop for a scheduler time slice, milliseconds, while a sleeping one costs microseconds."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import numba as module
    return module


def prange(n):
    """``numba.prange`` inside compiled loops; plain ``range`` when the loop runs as Python."""
    return range(n)


class Kernel:
    """A loop compiled by numba on its first call (``parallel`` as in :func:`kernel`)."""

    def __init__(self, loop, parallel: bool):
        self.loop = loop
        self.parallel = parallel
        self._variants: dict = {}
        functools.update_wrapper(self, loop)

    @property
    def compiled(self):
        """The numba dispatcher (compiling, or loading from the cache, when first asked)."""
        return self._variant(self.parallel)

    @property
    def serial(self):
        """The same loop compiled to run on the calling thread only, releasing the GIL (so
        several Python threads may each run one); its kernels called are serial too."""
        return self._variant(False, serial=True)

    def _variant(self, parallel: bool, serial: bool = False):
        key = (parallel, serial)
        if key not in self._variants:
            nb = numba()
            loop = self.loop
            code = loop.__code__
            used = {name: loop.__globals__.get(name) for name in code.co_names}
            names = {name: nb.prange if value is prange else
                     (value.serial if serial else value.compiled)
                     for name, value in used.items() if isinstance(value, Kernel) or value is prange}
            copy = types.FunctionType(code, {**loop.__globals__, **names}, loop.__name__,
                                      loop.__defaults__, loop.__closure__)
            copy.__qualname__ = loop.__qualname__ + ("_serial" if serial else "")
            self._variants[key] = nb.njit(parallel=parallel, nogil=serial, error_model="numpy",
                                          cache=True)(copy)
        return self._variants[key]

    def __call__(self, *args):
        return self.compiled(*args)


def kernel(loop, parallel: bool = True) -> Kernel:
    """``loop`` to be compiled with numba on first call. ``parallel`` compiles its
    ``prange`` loops to run on all cores; a function without one (or one called from inside
    another kernel's ``prange``) must be compiled with ``parallel=False``, which numba
    optimises far better there."""
    return Kernel(loop, parallel)


def usable(compiled, *arrays) -> bool:
    """Whether ``compiled`` may run on ``arrays``: numba is enabled and they are
    C-contiguous NumPy float32/float64 arrays of one dtype, the first of at least
    :data:`COMPILED_MIN` elements. Does not import numba."""
    if not (ENABLED and compiled is not None):
        return False
    first = arrays[0]
    if first.size < COMPILED_MIN:
        return False
    return all(isinstance(a, numpy.ndarray) and a.dtype == first.dtype and a.flags.c_contiguous
               for a in arrays) and first.dtype in DTYPES


_local = threading.local()


def threads(size: int) -> int:
    """The thread count for ``size`` elements of work: all cores from ``PARALLEL_MIN``."""
    return numba().config.NUMBA_NUM_THREADS if size >= PARALLEL_MIN else 1


def launch(compiled: Kernel, size: int, *args) -> None:
    """Runs ``compiled(*args)`` on all cores when ``size >= PARALLEL_MIN``, else on one.
    Inside :func:`batch` the launch is collected instead, to run when the batch ends: a
    fused step launches last, after its bookkeeping, and touches nothing afterwards."""
    pending = getattr(_local, "batch", None)
    if pending is not None:
        pending.append((compiled, size, args))
        return
    dispatcher = compiled.compiled
    wanted = threads(size)
    if getattr(_local, "threads", None) != wanted:
        numba().set_num_threads(wanted)
        _local.threads = wanted
    dispatcher(*args)


@contextlib.contextmanager
def batch():
    """Collects the launches made inside (on this thread) and runs them when the block ends:
    on this thread when their total size is below ``PARALLEL_MIN``, else spread over one
    Python thread per core, each launch a serial kernel on its own arrays. For launches on
    distinct arrays (an updater's list call) the results are those of running them in
    order, whatever the thread count. Inside another batch, the launches join that one."""
    if getattr(_local, "batch", None) is not None:
        yield
        return
    pending: list = []
    _local.batch = pending
    try:
        yield
    finally:
        _local.batch = None
        _run_all(pending)


@contextlib.contextmanager
def unbatched():
    """Runs the launches made inside at once, even within :func:`batch` (for a caller that
    reads the results right after)."""
    pending = getattr(_local, "batch", None)
    _local.batch = None
    try:
        yield
    finally:
        _local.batch = pending


def _run_all(pending) -> None:
    if not pending:
        return
    for compiled in {id(c): c for c, _, _ in pending}.values():
        compiled.serial                                   # compiles here, not in the workers
    workers = threads(sum(size for _, size, _ in pending))
    shares = [pending[k::workers] for k in range(workers)]
    futures = [_pool().submit(_run, share) for share in shares[1:]]
    _run(shares[0])
    for future in futures:
        future.result()


def _run(launches) -> None:
    for compiled, _, args in launches:
        compiled.serial(*args)


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max(1, numba().config.NUMBA_NUM_THREADS - 1),
                                                 thread_name_prefix="trainer-run-jit")
