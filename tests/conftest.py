"""Shared helpers: running the ``trainer-run`` command in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from trainer_run import jit


def run_cli(*args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """Runs ``trainer-run <args>`` (as ``python -m trainer_run.cli``) and captures its output."""
    return subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def make_synthetic(name: str, size: int, val_fraction: float, rng, **options):
    """The synthetic set ``name`` (``trainer_run.data.<name>``) as a run prepares it, with
    ``val_fraction`` held out."""
    from trainer_run import data

    generator = getattr(data, name)
    return data.prepare(generator(size, rng, **options), rng, val_fraction,
                        n_classes=data.declared_classes(generator, options))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def run_files(directory: Path) -> dict:
    """The files a run wrote in ``directory`` by name with their bytes (not the lock file, which
    records the last process that held the directory)."""
    return {p.name: p.read_bytes() for p in Path(directory).iterdir()
            if p.is_file() and p.name != ".lock"}


def load_npz(path: Path) -> dict:
    with numpy.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


SERIAL_MODULES = {"test_preemption", "test_run_directory", "test_download"}


def pytest_collection_modifyitems(items):
    """Under pytest-xdist (``--dist loadgroup``), the tests that start several MPI processes or
    time a process against the clock run on one worker, one after the other, never beside each
    other: on a 2-core machine two of them at once could miss their timeouts."""
    for item in items:
        if item.get_closest_marker("mpi") or item.module.__name__ in SERIAL_MODULES:
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
