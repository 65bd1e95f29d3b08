"""Where the PyTorch peer runs: its interpreter and the environments it is timed in.

PyTorch lives in its own virtual environment, never in this project's: ``$TORCH_PYTHON``,
else the first of :data:`TORCH_PYTHONS` that exists. Benchmarks skip the peer without one.
"""

from __future__ import annotations

import os
from pathlib import Path

TORCH_PYTHONS = ("/work/torch-venv/bin/python", "/work/torchvenv/bin/python")

GIVEN = dict(os.environ)
"""The environment the benchmark was started with (numba's import, in a benchmark's own
process, sets ``OMP_WAIT_POLICY`` for its threads)."""


def torch_python() -> str | None:
    """The PyTorch peer's interpreter, or None when there is none."""
    for python in (GIVEN.get("TORCH_PYTHON"), *TORCH_PYTHONS):
        if python and Path(python).exists():
            return python
    return None


def torch_envs() -> list[dict]:
    """The environments the peer runs in, its faster result counting: OpenMP's default waits
    (fastest on an idle machine) and passive ones, as numba's threads wait in trainer-run
    (:func:`trainer_run.jit.numba`; spinning threads cost PyTorch milliseconds per
    parallel region on a machine with more busy threads than cores). Only the user's
    setting when ``OMP_WAIT_POLICY`` was set."""
    if "OMP_WAIT_POLICY" in GIVEN:
        return [dict(GIVEN)]
    return [dict(GIVEN), {**GIVEN, "OMP_WAIT_POLICY": "PASSIVE"}]
