"""Fixtures and hooks shared by the tests (their plain helper functions are in ``helpers.py``).

GPU tests: a test marked ``gpu`` (directly, or through the ``cupy`` half of the ``xp_backend``
fixture) runs where CuPy sees a CUDA device and skips elsewhere, every one with the reason
:data:`GPU_REASON`. The default options deselect them (``-m 'not gpu'`` in pyproject.toml);
``pytest -m gpu`` selects them.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from mpi_jobs import run

from trainer_run import jit

SERIAL_MODULES = {"test_preemption", "test_run_directory", "test_directory", "test_download"}
"""The test files (by stem: tests/command/test_preemption.py, tests/command/test_run_directory.py,
tests/runs/test_directory.py, tests/data/test_download.py) whose tests run on the serial worker."""
GPU_REASON = "needs CuPy and a CUDA device (none here)"
BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]
"""The array backends a test parametrized over them runs on (see :func:`xp_backend`)."""


@functools.cache
def cuda_usable() -> bool:
    """Whether CuPy imports and sees at least one CUDA device (asked once per process)."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, no device, a broken install: no GPU here
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A ``gpu`` test skips, with one reason, where no CUDA device is usable (CuPy is asked
    only when such a test is about to run, so a run that deselects them never imports it)."""
    if item.get_closest_marker("gpu") and not cuda_usable():
        pytest.skip(GPU_REASON)


@pytest.fixture(params=BACKENDS)
def xp_backend(request) -> str:
    """The backend name, ``"numpy"`` and ``"cupy"`` (the latter marked ``gpu``)."""
    return request.param


@pytest.fixture
def rng():
    """A generator for a test's inputs, seeded alike for every test (a file's own ``rng``
    fixture takes precedence)."""
    import numpy

    return numpy.random.default_rng(1234)


@pytest.fixture
def cupy():
    """The cupy module, for a test marked ``gpu`` (which skips where there is none)."""
    import cupy

    return cupy


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Under pytest-xdist (``--dist loadgroup``), the tests that start several MPI processes or
    time a process against the clock run on one worker, one after the other, never beside each
    other: on a 2-core machine two of them at once could miss their timeouts. Marked before
    pytest-xdist's worker reads the marks into the test ids that its scheduler groups by (its
    hook, registered after this file, would otherwise run first and see none). The tests of a
    module that sets ``ONE_WORKER = True`` (its module-scoped fixture trains runs) run on one
    worker, so that fixture is built once, not on each worker."""
    for item in items:
        if (any(item.get_closest_marker(m) for m in ("mpi", "cluster", "slurm"))
                or item.path.stem in SERIAL_MODULES):
            item.add_marker(pytest.mark.xdist_group("serial"))
        elif getattr(item.module, "ONE_WORKER", False):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_generate_tests(metafunc):
    """The tests of a module that sets ``JIT_AND_NUMPY = True`` (the optimizers' tests against
    MXNet) run twice: with the compiled (numba) fused loops and with NumPy's."""
    if getattr(metafunc.module, "JIT_AND_NUMPY", False) and "jit_enabled" in metafunc.fixturenames:
        metafunc.parametrize("jit_enabled", [True, False], ids=["jit", "numpy"], indirect=True)


@pytest.fixture(autouse=True)
def jit_enabled(request, monkeypatch):
    """Whether fused optimizer steps may use compiled loops in this test. Never in the GPU
    tests (``test_gpu_*``): their NumPy side runs the array code the CuPy side runs, the
    reference CuPy is held to, and compiles nothing."""
    enabled = getattr(request, "param", jit.ENABLED) and jit.AVAILABLE
    if request.path.stem.startswith("test_gpu_"):
        enabled = False
    monkeypatch.setattr(jit, "ENABLED", enabled)
    monkeypatch.setattr(jit, "COMPILED_MIN", 0)  # the tests' small arrays take the kernels too
    return enabled


@pytest.fixture(scope="module")
def mpiexec():
    """The ``mpiexec`` that starts mpi4py's MPI (skips the test where there is none)."""
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed: pip install 'trainer-run[mpi]'")
    here = Path(sys.executable).parent / "mpiexec"
    exe = str(here) if here.exists() else shutil.which("mpiexec")
    if exe is None:
        pytest.skip("no mpiexec next to this Python or on PATH: pip install 'trainer-run[mpi]'")
    code, out = run([exe, "-n", "2", sys.executable, "-c",
                     "from mpi4py import MPI; print(f'size={MPI.COMM_WORLD.Get_size()};')"])
    if code != 0 or out.count("size=2;") != 2:
        pytest.skip(f"{exe} does not start 2 ranks of mpi4py's MPI (exit {code}): {out[-500:]}")
    return exe
