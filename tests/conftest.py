"""Fixtures and hooks shared by the tests (their plain helper functions are in ``helpers.py``)."""

from __future__ import annotations

import pytest

from trainer_run import jit

SERIAL_MODULES = {"test_preemption", "test_run_directory", "test_download"}


def pytest_collection_modifyitems(items):
    """Under pytest-xdist (``--dist loadgroup``), the tests that start several MPI processes or
    time a process against the clock run on one worker, one after the other, never beside each
    other: on a 2-core machine two of them at once could miss their timeouts."""
    for item in items:
        if (any(item.get_closest_marker(m) for m in ("mpi", "cluster", "slurm"))
                or item.module.__name__ in SERIAL_MODULES):
            item.add_marker(pytest.mark.xdist_group("serial"))


def pytest_generate_tests(metafunc):
    """Optimizer tests run twice: with the compiled (numba) fused loops and with NumPy's."""
    if metafunc.module.__name__.startswith("test_optimizers") and "jit_enabled" in metafunc.fixturenames:
        metafunc.parametrize("jit_enabled", [True, False], ids=["jit", "numpy"], indirect=True)


@pytest.fixture(autouse=True)
def jit_enabled(request, monkeypatch):
    """Whether fused optimizer steps may use compiled loops in this test."""
    enabled = getattr(request, "param", jit.ENABLED) and jit.AVAILABLE
    monkeypatch.setattr(jit, "ENABLED", enabled)
    monkeypatch.setattr(jit, "COMPILED_MIN", 0)  # the tests' small arrays take the kernels too
    return enabled
