"""Launching ``mpiexec`` from the tests (the ``mpiexec`` fixture is in conftest.py): :func:`run`
(a command in its own process group, killed past its timeout) and :func:`launch` (a script of
``tests/mpi/`` on ``n`` ranks, each rank's ``rank<r>.npz`` read back)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

SCRIPTS = Path(__file__).parent / "mpi"
ENV = {  # let Open MPI, if that is the MPI found, run as root and oversubscribe a small CI box
    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1", "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
}


def run(command, timeout=60, hang_ok=False):
    """Runs ``command`` in its own process group; kills the group when it outlives ``timeout``
    and fails the test, or with ``hang_ok`` returns None for the exit status."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, **ENV})
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        if hang_ok:
            return None, out
        pytest.fail(f"{' '.join(map(str, command))} still ran after {timeout} s:\n{out}")
    return proc.returncode, out


def launch(mpiexec, n, script, out_dir, *args, timeout=60) -> list:
    """Runs ``tests/mpi/<script>`` on ``n`` ranks; returns each rank's npz as a dict (None
    for a rank that wrote nothing)."""
    code, out = run([mpiexec, "-n", str(n), sys.executable, str(SCRIPTS / script),
                     str(out_dir), *args], timeout=timeout)
    seen = []
    for r in range(n):
        path = Path(out_dir) / f"rank{r}.npz"
        seen.append(dict(numpy.load(path)) if path.exists() else None)
    assert any(s is not None for s in seen), f"no rank wrote its results (exit {code}):\n{out}"
    return seen
