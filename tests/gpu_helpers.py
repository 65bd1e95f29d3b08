"""Helpers of the GPU tests (``tests/*/test_gpu_*.py``): a backend by name, host copies of
arrays of either backend, and comparisons of a device result with the NumPy one.

Every test body names its backend as a string (``"numpy"`` or ``"cupy"``) and builds it with
:func:`backend` (or passes :func:`backend_arg` to the command), so the same body runs on
either. :data:`RENAME` maps a name to another one; it is empty in the test suite. A dry run
of the GPU tests' bodies on a machine without a GPU maps ``"cupy"`` to ``"numpy"`` there, so
each comparison then runs NumPy against NumPy and must hold exactly.
"""

from __future__ import annotations

import numpy

from trainer_run.backend import get_backend

RENAME: dict[str, str] = {}
"""Backend name -> the name actually built (empty: each name is itself)."""


def backend(name: str, seed: int = 0, dtype="float32"):
    """The backend ``name`` (through :data:`RENAME`) with the run's generator seeded by ``seed``."""
    return get_backend(RENAME.get(name, name), seed=seed, dtype=dtype)


def backend_arg(name: str) -> str:
    """The command-line override choosing backend ``name`` (through :data:`RENAME`)."""
    return f"backend={RENAME.get(name, name)}"


def host(a) -> numpy.ndarray:
    """A NumPy copy of ``a``, an array of NumPy or CuPy, a NumPy scalar or a Python number."""
    if isinstance(a, (numpy.ndarray, numpy.generic, int, float)):
        return numpy.array(a)
    return a.get()  # a CuPy array: the explicit copy to the host


def assert_close(got, expected, rtol: float, atol: float, what: str = "") -> None:
    """``got`` (a device result: an array, or a dict or list of them) equals ``expected`` (the
    NumPy result of the same shape) within ``rtol``/``atol``, with the same dtypes and keys."""
    if isinstance(expected, dict):
        assert got.keys() == expected.keys(), what
        for k in expected:
            assert_close(got[k], expected[k], rtol, atol, f"{what} {k}")
        return
    if isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), what
        for k, (a, b) in enumerate(zip(got, expected)):
            assert_close(a, b, rtol, atol, f"{what}[{k}]")
        return
    a, b = host(got), host(expected)
    assert a.dtype == b.dtype, f"{what}: {a.dtype} on the device, {b.dtype} on NumPy"
    numpy.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def assert_within_float16_ulp(got, expected, what: str = "") -> None:
    """float16 arrays equal within one float16 unit in the last place of the larger value: a
    last-bit difference of a float32 value rounds its float16 copy to a neighbour at most."""
    a, b = host(got), host(expected)
    assert a.dtype == b.dtype == numpy.float16, what
    ulp = numpy.spacing(numpy.maximum(numpy.abs(a), numpy.abs(b)))
    over = numpy.abs(a.astype(numpy.float32) - b.astype(numpy.float32)) > ulp.astype(numpy.float32)
    assert not over.any(), f"{what}: {int(over.sum())} values differ by more than one ulp"
