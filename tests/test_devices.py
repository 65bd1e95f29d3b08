"""The GPUs this process sees (trainer_run.devices): visible GPUs pass, none without CuPy, and the peak
memory as the kernels' high-water mark and the pool's, freed blocks included."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy
import pytest

from trainer_run import devices


@pytest.mark.parametrize("visible, ids", [(1, [0]), (2, [0, 1]), (8, [3, 7])])
def test_visible_gpus_pass(monkeypatch, visible, ids):
    monkeypatch.setattr(devices, "gpu_count", lambda: visible)
    devices.check_visible(ids, "devices=...", "fix")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_without_cupy_no_gpu_is_seen():
    assert devices.gpu_count() == 0 and devices.gpus() == []


def test_the_peak_memory_is_the_kernels_high_water_mark():
    """``host`` is this process's peak resident size, the ``VmHWM`` Linux reports; it does not
    fall when memory is given back."""
    from trainer_run import devices

    block = numpy.ones(64 * 2**20 // 8)  # 64 MiB, touched
    held = devices.peak_memory(False)["host"]
    del block
    after = devices.peak_memory(False)["host"]
    status = Path("/proc/self/status").read_text()
    hwm = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
    assert after >= held and abs(after - hwm * 1024) <= 4 * 2**20
    assert held >= 64 * 2**20


@pytest.mark.gpu
def test_the_gpu_pool_peak_counts_what_was_freed(cupy):
    from trainer_run import devices

    block = cupy.ones(32 * 2**20 // 4, dtype=cupy.float32)  # 32 MiB
    del block
    assert devices.peak_memory(True)["gpu_pool"] >= 32 * 2**20
