"""The GPUs this process sees, and the versions of the array libraries.

For the first lines of a run and its ``summary.json`` (:meth:`.Backend.describe`,
:meth:`.Backend.device_record`), for ``trainer-run --info`` (:func:`info_lines`), and to
refuse in one line a GPU that is not there (:func:`check_visible`) instead of CUDA's
``cudaErrorInvalidDevice`` traceback.

CuPy is imported only when it is installed (found without importing it), and every call to
it is guarded: without a driver, or with a driver and no GPU, this process sees no GPU, and
nothing here fails. The NumPy path never imports CuPy.
"""

from __future__ import annotations

import importlib.util
import resource
import sys
from dataclasses import dataclass

import numpy

from .errors import ConfigError

GIB = 2**30


@dataclass(frozen=True)
class GPU:
    """One GPU: its id in this process (after ``CUDA_VISIBLE_DEVICES``), name and total
    memory in bytes."""

    id: int
    name: str
    memory_bytes: int

    def __str__(self) -> str:
        return f"{self.name}, {round(self.memory_bytes / GIB)} GiB"


def gpu_count() -> int:
    """How many GPUs CuPy sees; 0 without CuPy, a driver or a GPU."""
    cupy = _cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no driver (CUDARuntimeError, or a missing library): no GPU
        return 0


def gpu(device: int) -> GPU:
    """GPU ``device``'s name and memory (CuPy's ``getDeviceProperties``); needs CuPy and
    a visible ``device``."""
    import cupy

    properties = cupy.cuda.runtime.getDeviceProperties(device)
    name = properties.get("name", properties.get(b"name", "unknown GPU"))
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    memory = properties.get("totalGlobalMem", properties.get(b"totalGlobalMem", 0))
    return GPU(device, name.rstrip("\x00").strip() or "unknown GPU", int(memory))


def gpus() -> list[GPU]:
    """Every GPU CuPy sees (none without CuPy or a driver)."""
    found = []
    for device in range(gpu_count()):
        try:
            found.append(gpu(device))
        except Exception:  # a device the driver lists but cannot describe
            found.append(GPU(device, "unknown GPU", 0))
    return found


def peak_memory(on_gpu: bool) -> dict:
    """The most memory this process has held, in bytes: ``host`` (its peak resident size,
    the kernel's high-water mark) and, ``on_gpu``, ``gpu_pool`` (what CuPy's memory pool
    holds: it keeps the blocks it frees for reuse, so this is the most it held at once)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    record = {"host": peak if sys.platform == "darwin" else peak * 1024}  # Linux: KiB
    if on_gpu:
        import cupy

        record["gpu_pool"] = int(cupy.get_default_memory_pool().total_bytes())
    return record


def visible(count: int) -> str:
    """``count`` visible GPUs in words: ``1 GPU is visible (id 0)``, ``2 GPUs are visible
    (ids 0, 1)``."""
    if count == 1:
        return "1 GPU is visible (id 0)"
    return f"{count} GPUs are visible (ids {_ids(range(count))})"


def check_visible(ids, asked: str, fix: str) -> None:
    """Refuses (ConfigError, one line) device ``ids`` beyond the GPUs this process sees:
    ``asked`` says what the config asked for (``devices=2``), ``fix`` what to do when some
    GPUs are visible; with none, the line says to train on the CPU."""
    count = gpu_count()
    if all(i < count for i in ids):
        return
    what = f"{asked} asks for GPU{'s' if len(ids) > 1 else ''} {_ids(ids)}"
    if count == 0:
        raise ConfigError(f"{what}, but no GPU is visible (CuPy finds no CUDA device; nvidia-smi "
                          "shows whether the driver sees one): train on the CPU with "
                          "backend=numpy")
    raise ConfigError(f"{what}, but {visible(count)}: {fix}")


def info_lines() -> list[str]:
    """What ``trainer-run --info`` says of the devices: NumPy's version, CuPy's with the CUDA
    runtime and driver versions (or ``cupy: not installed``), and each GPU seen (or
    ``GPUs: none``). Needs no GPU, and no driver."""
    lines = [f"numpy: {numpy.__version__}"]
    cupy = _cupy()
    if cupy is None and importlib.util.find_spec("cupy") is not None:
        lines.append(f"cupy: installed, but importing it fails: {_import_error()}")
    elif cupy is None:
        lines.append("cupy: not installed (pip install 'trainer-run[cuda12]' or "
                     "'trainer-run[cuda13]', as nvidia-smi's CUDA Version says)")
    else:
        runtime = _cuda_version(lambda: cupy.cuda.runtime.runtimeGetVersion())
        driver = _cuda_version(lambda: cupy.cuda.runtime.driverGetVersion())
        lines.append(f"cupy: {getattr(cupy, '__version__', 'unknown')} (CUDA runtime {runtime}, "
                     f"driver {driver})")
    found = gpus()
    if not found:
        lines.append("GPUs: none")
    for device in found:
        lines.append(f"gpu:{device.id}: {device}")
    return lines


def _cupy():
    """The CuPy module when it is installed and imports; None otherwise."""
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        import cupy
    except Exception:  # installed, and broken (a CUDA library it needs is missing)
        return None
    return cupy


def _import_error() -> str:
    """Why ``import cupy`` fails, in one line."""
    try:
        import cupy  # noqa: F401
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
    return "it imports now"


def _cuda_version(ask) -> str:
    """A CUDA version number (``13000``) as ``13.0``; ``none`` where it cannot be asked (no
    driver)."""
    try:
        number = int(ask())
    except Exception:
        return "none"
    if number <= 0:
        return "none"
    return f"{number // 1000}.{number % 1000 // 10}"


def _ids(ids) -> str:
    return ", ".join(str(i) for i in ids)
