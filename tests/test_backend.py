"""The array backend (trainer_run.backend): NumPy's describes the CPU and the BLAS threads it uses."""

from __future__ import annotations

import json

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
