"""An ``mpiexec`` job prints an error once, not once per rank; a rank that fails alone still
says why (:mod:`trainer_run.cli.rank_errors`)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy
import pytest

pytestmark = pytest.mark.mpi


def job(mpiexec, folder, *arguments):  # noqa: F811
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "keys")}
    return subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "trainer_run.cli",
                           "kvstore=dist_sync", "kvstore.timeout=10", *arguments],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def errors(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("mistake", ["optimizer=nosuch", "optimizer.learning_rate=-1",
                                     "trainer.log_interval=0"])
def test_a_mistake_every_rank_makes_is_one_line(mpiexec, tmp_path, mistake):  # noqa: F811
    done = job(mpiexec, tmp_path, mistake, f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stderr
    assert len(errors(done)) == 1, done.stderr
    assert "rank" not in errors(done)[0]
    assert not (tmp_path / "run").exists()


def test_a_rank_that_fails_alone_says_why_once(mpiexec, tmp_path):  # noqa: F811
    """Each rank reads its own file; rank 1's is missing: its line is printed once, named by
    its rank, beside rank 0's own."""
    rng = numpy.random.default_rng(0)
    numpy.savez(tmp_path / "part0.npz", x=rng.random((100, 3), dtype=numpy.float32),
                y=numpy.arange(100) % 2)
    done = job(mpiexec, tmp_path, "dataset=npz", "dataset.path='part${oc.env:PMI_RANK}.npz'",
               "trainer.max_iterations=5", f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode != 0
    mine = [line for line in errors(done) if "part1.npz" in line]
    assert len(mine) == 1 and mine[0].startswith("error: rank 1: "), done.stderr
