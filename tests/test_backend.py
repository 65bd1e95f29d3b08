"""The array backend (trainer_run.backend): NumPy's describes the CPU and the BLAS threads it uses."""

from __future__ import annotations

import json

import numpy
import pytest

from trainer_run import blas_threads
from trainer_run.backend import Backend


@pytest.mark.parametrize("threads, words", [(4, "numpy (cpu, 4 threads)"),
                                            (1, "numpy (cpu, 1 thread)"),
                                            (None, "numpy (cpu)")])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_numpy_backend_describes_the_cpu_and_the_blas_threads(monkeypatch, threads, words, dtype):
    monkeypatch.setattr(blas_threads, "current", lambda: threads)
    backend = Backend("numpy", dtype=dtype)
    assert backend.describe() == words
    assert backend.device_record() == {"backend": "numpy", "device": "cpu", "threads": threads,
                                       "dtype": dtype}
    json.dumps(backend.device_record())  # plain data, for summary.json


def test_where_an_array_lives_and_what_waits_for_the_host():
    from trainer_run.backend import Backend, device_of

    host = Backend("numpy")
    assert (host.on_gpu, host.synchronizer()) == (False, None)
    assert device_of(numpy.zeros(3)) is None
    with pytest.raises(TypeError, match="expected a NumPy or CuPy array, got list"):
        device_of([1.0])


def test_only_the_backend_tells_numpy_from_cupy_by_name():
    """Every other module asks the backend (``on_gpu``, ``device_of``, ``synchronizer``): a
    comparison with the string "cupy" outside backend.py and devices.py (the probe that finds
    CuPy) fails here."""
    import ast
    from pathlib import Path

    import trainer_run

    root = Path(trainer_run.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name in ("backend.py", "devices.py") and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value == "cupy"
                    for c in [node.left, *node.comparators]):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, found
