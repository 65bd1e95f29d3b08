"""Training under a real SLURM (a one-node cluster the tests start, see ``slurm_cluster.py``).

Run them with ``pytest -m slurm`` as root on a machine with ``slurm-wlm`` and ``munge``
(Debian); they skip elsewhere."""

import csv
import subprocess
import sys

import pytest
from helpers import run_cli
from slurm_cluster import Slurm, available, free_port
from test_cli_dist import COMMON, assert_equals_one_process_of_batch_50

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
    assert_equals_one_process_of_batch_50(tmp_path / "two", tmp_path / "one")


def _ranked(sweep_dir):
    """``(rank, overrides, best)`` rows of a sweep's results.csv."""
    rows = list(csv.DictReader((sweep_dir / "results.csv").open()))
    return [(r["rank"], r["overrides"], float(r["best"])) for r in rows]


def test_a_sweep_with_the_submitit_slurm_launcher_runs_its_jobs_through_the_scheduler(slurm, tmp_path):
    """``-m hydra/launcher=submitit_slurm``: both jobs are SLURM jobs (scontrol: COMPLETED),
    and the ranked table is the local sweep's."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweep = ["optimizer=adam,sgd", "trainer.max_iterations=200", "trainer.progress=false"]
    done = slurm.run([sys.executable, "-m", "trainer_run.cli", "-m", "hydra/launcher=submitit_slurm",
                      "hydra.launcher.partition=debug", "hydra.launcher.timeout_min=10",
                      "hydra.launcher.cpus_per_task=1", *sweep, f"hydra.sweep.dir={tmp_path / 'slurm'}"],
                     timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    local = run_cli("-m", *sweep, f"hydra.sweep.dir={tmp_path / 'local'}")
    assert local.returncode == 0, local.stderr
    assert _ranked(tmp_path / "slurm") == _ranked(tmp_path / "local")
    job_ids = {p.name.split("_")[0] for p in (tmp_path / "slurm" / ".submitit").iterdir()
               if p.name[0].isdigit()}
    assert job_ids, "no submitit job folders"
    for job_id in job_ids:
        shown = slurm.run(["scontrol", "show", "job", job_id])
        assert shown.stdout.count("JobState=COMPLETED") == 2, (job_ids, shown)  # the array's two tasks


def _one_line(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_partition_that_does_not_exist_is_one_line_and_nothing_is_written(slurm, tmp_path):
    done = slurm.run([sys.executable, "-m", "trainer_run.cli", "-m", "hydra/launcher=submitit_slurm",
                      "hydra.launcher.partition=nosuch", "optimizer=adam,sgd",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    assert _one_line(done) == ("error: hydra.launcher.partition=nosuch is not a partition of this "
                               "cluster; sinfo lists debug")
    assert not (tmp_path / "sweep").exists()


def test_slurm_not_running_is_one_line_and_nothing_is_written(slurm, tmp_path):
    """A config naming a controller nobody listens on (ports of a cluster that is down)."""
    down = tmp_path / "slurm.conf"
    conf = (slurm.dir / "slurm.conf").read_text()
    down.write_text(conf.replace(f"SlurmctldPort={slurm.ctld_port}", f"SlurmctldPort={free_port()}"))
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", "-m", "hydra/launcher=submitit_slurm",
                           "optimizer=adam,sgd", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                          env={**slurm.env, "SLURM_CONF": str(down)}, capture_output=True, text=True,
                          timeout=120)
    line = _one_line(done)
    assert line.startswith("error: SLURM does not answer (") and "is slurmctld running?" in line, line
    assert not (tmp_path / "sweep").exists()
