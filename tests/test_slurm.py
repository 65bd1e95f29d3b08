"""Training under a real SLURM (a one-node cluster the tests start, see ``slurm_cluster.py``).

Run them with ``pytest -m slurm`` as root on a machine with ``slurm-wlm`` and ``munge``
(Debian); they skip elsewhere."""

import sys

import numpy
import pytest
from helpers import load_npz, run_cli
from slurm_cluster import Slurm, available
from test_cli_dist import COMMON

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    why = available()
    if why is not None:
        pytest.skip(why)
    with Slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def test_srun_runs_a_dist_sync_job_that_equals_one_process_of_the_doubled_batch(slurm, tmp_path):
    """``srun -n 2 --mpi=pmi2`` starts both ranks (MPICH through SLURM's PMI-2, no mpiexec):
    batch 25 each equals one process of batch 50, within the single-host test's tolerance."""
    done = slurm.run(["srun", "-n", "2", "--mpi=pmi2", sys.executable, "-m", "trainer_run.cli", *COMMON,
                      "kvstore=dist_sync", "dataset.batch_size=25", "trainer.max_iterations=30",
                      f"hydra.run.dir={tmp_path / 'two'}"], timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    single = run_cli(*COMMON, "dataset.batch_size=50", "trainer.max_iterations=30",
                     f"hydra.run.dir={tmp_path / 'one'}")
    assert single.returncode == 0, single.stderr
    two, one = load_npz(tmp_path / "two" / "model.npz"), load_npz(tmp_path / "one" / "model.npz")
    for k in one:
        numpy.testing.assert_allclose(two[k], one[k], rtol=1e-5, atol=1e-6, err_msg=k)
