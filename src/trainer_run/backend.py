"""The array backend: which array module (``xp``) runs the math, on which device.

A :class:`Backend` is chosen once per run. Library code asks it for ``xp`` and never
branches on NumPy versus CuPy itself; moving arrays between host and device goes through
:meth:`Backend.asarray` and :meth:`Backend.to_numpy`, used by the converter, the kvstore
and checkpoint code only.

The backend also owns the run's random generator. Every random draw of a run (parameter
initialisation, shuffling, noise) comes from generators derived from the run's seed, and
their states are plain JSON so a checkpoint can restore them exactly.
"""

from __future__ import annotations

import contextlib
import importlib.util

import numpy

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
    """

    def __init__(self, name: str = "numpy", device: int = 0, seed: int = 0, dtype="float32"):
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

    def __repr__(self) -> str:
        where = "cpu" if self.device is None else f"gpu:{self.device}"
        return f"Backend({self.name}, {where})"

    def asarray(self, array, dtype=None):
        """Returns ``array`` as an array of this backend's module on its device."""
        if self.name == "cupy":
            with self.xp.cuda.Device(self.device):
                return self.xp.asarray(array, dtype=dtype)
        return numpy.asarray(array, dtype=dtype)

    def slow_dtype(self) -> str | None:
        """A warning when the compute dtype runs far slower than float32 on this backend, else
        None: NumPy has no float16 arithmetic of its own (no BLAS for it; each operation
        converts to float32 and back), so ``precision=fp16`` on the CPU trains many times slower
        (65x for ``model=mlp dataset=mnist_like`` on 2 cores) and saves nothing."""
        if self.name != "numpy" or self.dtype != numpy.float16:
            return None
        return ("precision=fp16 on the NumPy backend trains many times slower than fp32 (NumPy "
                "has no fast float16 arithmetic): choose precision=fp32 on the CPU, or "
                "backend=cupy to train in fp16 on a GPU")

    def activate(self):
        """A context in which new arrays of ``xp`` are created on this backend's device."""
        if self.name == "cupy":
            return self.xp.cuda.Device(self.device)
        return contextlib.nullcontext()

    def to_numpy(self, array) -> numpy.ndarray:
        """Returns a host NumPy copy (or the array itself, when it already is one)."""
        if isinstance(array, (numpy.ndarray, numpy.generic)):
            return array
        return self.xp.asnumpy(array)

    def state_dict(self) -> dict:
        """The generator's state, as JSON-serialisable plain data."""
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]


def array_module(a):
    """``numpy`` or ``cupy``, whichever owns the array ``a`` (NumPy for scalars)."""
    if isinstance(a, numpy.ndarray) or numpy.isscalar(a):
        return numpy
    import cupy

    return cupy.get_array_module(a)


def get_backend(name: str = "auto", device: int = 0, seed: int = 0, dtype="float32") -> Backend:
    """Builds the backend ``name`` (one of :data:`NAMES`; ``"auto"`` picks CuPy when a GPU is
    usable, else NumPy) on ``device`` with a generator seeded by ``seed``, computing in
    ``dtype`` (see :class:`Backend`). The config's ``backend`` options name it with
    ``_target_``."""
    if name == "auto":
        name = "cupy" if _cupy_usable() else "numpy"
    return Backend(name, device=device, seed=seed, dtype=dtype)


def _cupy_usable() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, no device: the CPU it is
        return False


def _import_cupy():
    try:
        import cupy
    except ImportError:
        raise ConfigError(
            "name=cupy needs CuPy; install it with `pip install trainer-run[cuda]` "
            "or choose backend=numpy"
        ) from None
    return cupy
