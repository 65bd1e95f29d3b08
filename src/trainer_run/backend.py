"""The array backend: which array module (``xp``) runs the math, on which device.

A :class:`Backend` is chosen once per run. Library code asks it for ``xp`` and never
branches on NumPy versus CuPy itself; moving arrays between host and device goes through
:meth:`Backend.asarray` and :meth:`Backend.to_numpy`, used by the converter, the kvstore
and checkpoint code only.

The backend also owns the run's random generator. Every random draw of a run (parameter
initialisation, shuffling, noise) comes from generators derived from the run's seed, and
their states are plain JSON so a checkpoint can restore them exactly.

And it owns the number of threads of NumPy's BLAS (``backend.threads``,
:mod:`~trainer_run.blas_threads`), which decides how a matrix product is split and so its
last bits: the count in use is recorded in the backend's state, and a resumed run uses the
recorded count unless its config names one, so that it matches the uninterrupted run bit
for bit on a machine with another number of cores. What the backend has to say (the count a
resumed run uses, a warning that the BLAS cannot be set, or that its compute dtype runs many
times slower than float32 here) is in :attr:`Backend.notes`, for the command to print.
"""

from __future__ import annotations

import contextlib

import numpy

from . import blas_threads, devices, host_reads
from .errors import ConfigError, check_number

NAMES = ("numpy", "cupy", "auto")
"""The array modules :func:`get_backend` chooses from (``auto``: CuPy when a GPU is usable)."""
DTYPES = ("float16", "float32", "float64")


class Backend:
    """An array module bound to one device, with the run's random generator.

    Args:
        name: ``"numpy"`` or ``"cupy"``.
        device: device id (>= 0) for CuPy; ignored by NumPy (always the host).
        seed: seed of the backend's generator (``numpy.random.Generator``, PCG64).
        dtype: the floating dtype models compute in (``float32``, or ``float16`` for mixed
            precision); the converter casts floating inputs to it.
        threads: the number of threads of NumPy's BLAS, set now (None: the BLAS's choice
            stands, and a resumed run takes the count its state recorded).
        deferred: whether the training loop keeps its losses, metrics and verdicts on the
            device and reads them only at log rows, evaluations and checkpoints
            (:mod:`~trainer_run.updaters.device_verdict`; None: on CuPy, where every read
            waits for the GPU). NumPy reads cost nothing, so there the loop reads at once;
            ``deferred=True`` runs the device's way on the CPU, as the tests do.
    """

    def __init__(self, name: str = "numpy", device: int = 0, seed: int = 0, dtype="float32",
                 threads: int | None = None, deferred: bool | None = None):
        if name not in ("numpy", "cupy"):
            raise ConfigError(f"name={name!r} is not a backend; choose one of {', '.join(NAMES)}")
        if str(dtype) not in DTYPES:
            raise ConfigError(f"dtype={dtype!r} is not a compute dtype; choose one of {', '.join(DTYPES)}")
        device = check_number("device", device, low=0, integer=True)
        self.dtype = numpy.dtype(str(dtype))
        self.name = name
        self.device = device if name == "cupy" else None
        self.xp = _import_cupy() if name == "cupy" else numpy
        self.rng = numpy.random.default_rng(seed)
        self.deferred = name == "cupy" if deferred is None else bool(deferred)
        self.threads = None if threads is None else check_number("threads", threads, low=1,
                                                                 integer=True)
        self.notes: list[str] = []
        """Lines for the user (``warning: ...`` or plain): a compute dtype that runs slowly
        here, the BLAS's threads."""
        if self.name == "numpy" and self.dtype == numpy.float16:
            # NumPy has no float16 arithmetic of its own (no BLAS for it; each operation
            # converts to float32 and back)
            self.notes.append("warning: precision=fp16 on the NumPy backend trains many times "
                              "slower than fp32 (NumPy has no fast float16 arithmetic): choose "
                              "precision=fp32 on the CPU, or backend=cupy to train in fp16 on a GPU")
        if self.threads is not None:
            why = blas_threads.refused(self.threads, blas_threads.use(self.threads))
            if why is not None:
                self.notes.append(f"warning: backend.threads={self.threads} cannot be "
                                  f"applied: {why}")

    def __repr__(self) -> str:
        where = "cpu" if self.device is None else f"gpu:{self.device}"
        return f"Backend({self.name}, {where})"

    @property
    def on_gpu(self) -> bool:
        """Whether this backend computes on a GPU (CuPy), not on the host (NumPy)."""
        return self.name == "cupy"

    def synchronizer(self):
        """What waits for this backend's device to finish its work (its CUDA device's
        ``synchronize``), or None on the host, where a call returns when its work is done."""
        return self.xp.cuda.Device(self.device).synchronize if self.on_gpu else None

    def asarray(self, array, dtype=None):
        """Returns ``array`` as an array of this backend's module on its device."""
        if self.name == "cupy":
            with self.xp.cuda.Device(self.device):
                return self.xp.asarray(array, dtype=dtype)
        return numpy.asarray(array, dtype=dtype)

    def activate(self):
        """A context in which new arrays of ``xp`` are created on this backend's device."""
        if self.name == "cupy":
            return self.xp.cuda.Device(self.device)
        return contextlib.nullcontext()

    def to_numpy(self, array) -> numpy.ndarray:
        """Returns a host NumPy copy (or the array itself, when it already is one): a read
        (:mod:`~trainer_run.host_reads`)."""
        return host_reads.array(array)

    def state_dict(self) -> dict:
        """The generator's state and the BLAS's thread count in use (None where it cannot be
        asked), as JSON-serialisable plain data."""
        return {"rng": self.rng.bit_generator.state, "blas_threads": blas_threads.current()}

    def load_state_dict(self, state: dict) -> None:
        """Restores the generator, and the BLAS's thread count the state recorded unless this
        backend was given one (a state without one, from an older run, changes nothing); a
        line in :attr:`notes` says which count the run uses."""
        self.rng.bit_generator.state = state["rng"]
        recorded = blas_threads.checked(state.get("blas_threads"))
        if recorded is None:
            return
        if self.threads is not None and self.threads != recorded:
            self.notes.append(f"BLAS threads: {self.threads} (backend.threads), where the run "
                              f"recorded {recorded}: from here it may differ in the last bits "
                              "from the uninterrupted run")
            return
        why = None if self.threads is not None else blas_threads.refused(
            recorded, blas_threads.use(recorded))
        if why is None:
            self.notes.append(f"BLAS threads: {recorded}, as the run recorded")
        else:
            self.notes.append(f"warning: the run recorded {recorded} BLAS threads, and {why}: "
                              "this resumed run may differ in the last bits from the "
                              "uninterrupted one")

    def describe(self) -> str:
        """The backend and its device in words, for a run's first lines: ``cupy, gpu:0
        (NVIDIA H200, 140 GiB)`` or ``numpy (cpu, 8 threads)`` (the BLAS's threads in use;
        ``numpy (cpu)`` where they cannot be asked); :meth:`device_record` in words."""
        if self.name == "cupy":
            return f"cupy, gpu:{self.device} ({devices.gpu(self.device)})"
        threads = blas_threads.current()
        return "numpy (cpu)" if threads is None else \
            f"numpy (cpu, {threads} thread{'s' if threads != 1 else ''})"

    def device_record(self) -> dict:
        """What :meth:`describe` says, as plain data for ``summary.json``: ``{"backend":
        "cupy", "device": "gpu:0", "name": ..., "memory_bytes": ..., "dtype": ...}`` or
        ``{"backend": "numpy", "device": "cpu", "threads": N or None, "dtype": ...}``."""
        if self.name == "cupy":
            gpu = devices.gpu(self.device)
            return {"backend": self.name, "device": f"gpu:{self.device}", "name": gpu.name,
                    "memory_bytes": gpu.memory_bytes, "dtype": str(self.dtype)}
        return {"backend": self.name, "device": "cpu", "threads": blas_threads.current(),
                "dtype": str(self.dtype)}


def device_of(a) -> int | None:
    """The GPU holding the array ``a`` (a CuPy array's device id), or None for a NumPy array;
    anything else is refused (TypeError)."""
    if isinstance(a, numpy.ndarray):
        return None
    if type(a).__module__.split(".")[0] == "cupy" and hasattr(a, "device"):
        return a.device.id
    raise TypeError(f"expected a NumPy or CuPy array, got {type(a).__name__}")


def array_module(a):
    """``numpy`` or ``cupy``, whichever owns the array ``a`` (NumPy for scalars)."""
    if isinstance(a, numpy.ndarray) or numpy.isscalar(a):
        return numpy
    import cupy

    return cupy.get_array_module(a)


def get_backend(name: str = "auto", device: int = 0, seed: int = 0, dtype="float32",
                threads: int | None = None, deferred: bool | None = None) -> Backend:
    """Builds the backend ``name`` (one of :data:`NAMES`; ``"auto"`` picks CuPy when a GPU is
    usable, else NumPy) on ``device`` with a generator seeded by ``seed``, computing in
    ``dtype``, NumPy's BLAS on ``threads`` threads (None: the count the BLAS chose when the
    process started, restored if a run before in this process set another; see
    :class:`Backend`), reading the device ``deferred`` (see :class:`Backend`). The config's
    ``backend`` options name it with ``_target_``."""
    if name == "auto":
        name = "cupy" if devices.gpu_count() > 0 else "numpy"
    if threads is None:
        blas_threads.restore()
    return Backend(name, device=device, seed=seed, dtype=dtype, threads=threads,
                   deferred=deferred)




def _import_cupy():
    try:
        import cupy
    except ImportError:
        raise ConfigError(
            "name=cupy needs CuPy: install it with pip install 'trainer-run[cuda12]' (or "
            "'trainer-run[cuda13]' for CUDA 13; nvidia-smi shows the driver's CUDA Version), "
            "or choose backend=numpy"
        ) from None
    return cupy
