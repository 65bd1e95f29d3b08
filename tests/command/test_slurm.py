"""Training under a real SLURM (a one-node cluster the tests start, see ``slurm_cluster.py``).

Run them with ``pytest -m slurm`` as root on a machine with ``slurm-wlm`` and ``munge``
(Debian); they skip elsewhere."""

import csv
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_cli
from mpi_jobs import run
from slurm_cluster import Slurm, available, free_port

from tests.command.test_cli_dist import COMMON, assert_equals_one_process_of_batch_50
from tests.command.test_preemption import assert_same_model_and_metrics, assert_same_run

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


def submitit_jobs(sweep_dir) -> set[str]:
    """The SLURM job ids of a sweep's submitit folders (``.submitit/<id>/``)."""
    return {p.name.split("_")[0] for p in (sweep_dir / ".submitit").iterdir() if p.name[0].isdigit()}


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
    job_ids = submitit_jobs(tmp_path / "slurm")
    assert job_ids, "no submitit job folders"
    for job_id in job_ids:
        shown = slurm.run(["scontrol", "show", "job", job_id])
        assert shown.stdout.count("JobState=COMPLETED") == 2, (job_ids, shown)  # the array's two tasks


def _one_line(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def launcher_config(folder: Path, **values) -> list[str]:
    """A launcher config of the user's, ``folder/hydra/launcher/cluster.yaml`` extending
    ``submitit_slurm`` with ``values``: the arguments that choose it."""
    path = folder / "hydra" / "launcher" / "cluster.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("defaults:\n  - submitit_slurm\n\n" + "".join(f"{k}: {v}\n" for k, v in values.items()))
    return ["--config-dir", str(folder), "hydra/launcher=cluster"]


@pytest.mark.parametrize("where", ["command line", "launcher config"])
def test_a_partition_that_does_not_exist_is_one_line_and_nothing_is_written(slurm, tmp_path, where):
    chosen = (["hydra/launcher=submitit_slurm", "hydra.launcher.partition=nosuch"] if where == "command line"
              else launcher_config(tmp_path / "conf", partition="nosuch"))
    done = slurm.run([sys.executable, "-m", "trainer_run.cli", "-m", *chosen, "optimizer=adam,sgd",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    assert _one_line(done) == ("error: hydra.launcher.partition=nosuch is not a partition of this "
                               "cluster; sinfo lists debug, urgent")
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


# -- preemption and requeue ------------------------------------------------------------------

LONG = ("optimizer=adam", "trainer.max_iterations=4000", "dataset.batch_size=800", "trainer.progress=false",
        "trainer.checkpoint_interval=100", "trainer.log_interval=50", "trainer.eval_interval=500")
"""A run of a few seconds, checkpointed every 100 iterations: long enough to stop halfway."""


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The run :data:`LONG` trained without a stop, to compare the requeued ones with."""
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    done = run_cli(*LONG, f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    return out


def _rows(folder: Path) -> int:
    """The rows logged by the runs under ``folder`` so far (0 while a folder walked through, a
    checkpoint's temporary one, is renamed away under the walk)."""
    try:
        return sum(p.read_bytes().count(b"\n") for p in folder.rglob("metrics.jsonl"))
    except FileNotFoundError:
        return 0


def _halfway(folder: Path, timeout: float = 120) -> None:
    """Waits until a run under ``folder`` has logged 8 rows (iteration 400 of 4000)."""
    deadline = time.monotonic() + timeout
    while _rows(folder) < 8:
        assert time.monotonic() < deadline, f"no run under {folder} logged 8 rows in {timeout:g} s"
        time.sleep(0.02)


def _job(slurm, job_id: str) -> dict:
    """``scontrol show job``'s fields (``JobState``, ``Restarts``, ...)."""
    shown = slurm.run(["scontrol", "show", "job", job_id]).stdout
    return dict(field.split("=", 1) for field in shown.split() if "=" in field)


def _finished(slurm, job_id: str, timeout: float = 180) -> dict:
    """The job's fields once it has ended (requeued jobs pass through PENDING again)."""
    deadline = time.monotonic() + timeout
    while (job := _job(slurm, job_id)).get("JobState") not in ("COMPLETED", "FAILED", "CANCELLED"):
        assert time.monotonic() < deadline, f"job {job_id} still {job.get('JobState')} after {timeout:g} s"
        time.sleep(0.5)
    return job


def _sbatch(slurm, folder: Path, *overrides: str, partition: str = "debug", tasks: int = 1) -> str:
    """A requeueable batch job of ``tasks`` ranks running ``srun --mpi=pmi2 trainer-run LONG
    overrides`` in ``folder``; its id."""
    script = folder / "train.sh"
    threads = "export OMP_NUM_THREADS=1\n" if tasks > 1 else ""  # ranks sharing cores: one thread each
    script.write_text(f"#!/bin/bash\n{threads}srun --mpi=pmi2 {sys.executable} -m trainer_run.cli "
                      f"{' '.join(LONG + overrides)}\n")
    done = slurm.run(["sbatch", "--requeue", "--open-mode=append", "-p", partition, f"--ntasks={tasks}",
                      "-D", str(folder), "-o", str(folder / "job.out"), str(script)])
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def test_usr1_checkpoints_requeues_the_job_and_the_restart_resumes_bit_for_bit(slurm, tmp_path,
                                                                               mpiexec):  # noqa: F811
    """``#SBATCH --signal=USR1@<s>``'s signal (sent here by scancel) to a job of two ranks: the
    run stops with a checkpoint and requeues its own job (``scontrol requeue``); the job starts
    again with the same command, which resumes the run it recorded and ends bit-identical to one
    that never stopped. (The killed ranks leave MPICH's segment of this job id in /dev/shm; the
    restarted ranks remove it before MPI starts, else they would attach to it and fail.)"""
    two_ranks = ("kvstore=dist_sync", "dataset.batch_size=400")
    reference = tmp_path / "reference"
    code, said = run(["env", "OMP_NUM_THREADS=1", mpiexec, "-n", "2", sys.executable, "-m", "trainer_run.cli",
                      *LONG, *two_ranks, f"hydra.run.dir={reference}"], timeout=180)
    assert code == 0, said
    out = tmp_path / "run"
    job_id = _sbatch(slurm, tmp_path, *two_ranks, f"hydra.run.dir={out}", tasks=2)
    _halfway(out)
    assert slurm.run(["scancel", "--signal=USR1", job_id]).returncode == 0
    job = _finished(slurm, job_id)
    log = (tmp_path / "job.out").read_text()
    assert job["JobState"] == "COMPLETED" and job["Restarts"] == "1", (job, log)
    assert f"SIGUSR1: SLURM job {job_id} requeued" in log, log
    assert f"SLURM job {job_id} was requeued (restart 1): continuing its run in {out}" in log, log
    assert_same_model_and_metrics(out, reference)


def test_preemption_by_a_more_urgent_job_requeues_the_run_and_it_resumes_bit_for_bit(slurm, tmp_path,
                                                                                      uninterrupted):
    """Real preemption: a job of the higher-priority partition ``urgent`` needs the whole node,
    SLURM sends the run SIGTERM (twice: step and job) and requeues it (PreemptMode=REQUEUE).
    The run names no ``hydra.run.dir``: the restarted job finds its run among ``runs/<date>/<time>``
    by the job id it recorded."""
    job_id = _sbatch(slurm, tmp_path)
    _halfway(tmp_path / "runs")
    urgent = slurm.run(["sbatch", "-p", "urgent", "--exclusive", "-o", "/dev/null", "--wrap", "true"])
    assert urgent.returncode == 0, urgent.stderr
    job = _finished(slurm, job_id)
    log = (tmp_path / "job.out").read_text()
    assert job["JobState"] == "COMPLETED" and job["Restarts"] == "1", (job, log)
    (out,) = (tmp_path / "runs").glob("*/*")
    assert "DUE TO PREEMPTION" in log and "interrupted at iteration" in log, log
    assert "again: aborting" not in log, log  # SLURM's second SIGTERM (job after step) is no abort
    assert f"SLURM job {job_id} was requeued (restart 1): continuing its run in" in log, log
    assert_same_run(out, uninterrupted)


def test_a_sweep_job_at_its_time_limit_checkpoints_is_requeued_and_resumes_bit_for_bit(slurm, tmp_path,
                                                                                       uninterrupted):
    """The time limit for real: a launcher config with ``timeout_min: 1`` (SLURM's least) and
    ``signal_delay_s: 10`` has SLURM send USR2 at the first of its 30-second time-limit checks
    that falls within 10 + 30 s of the limit: 20 to 50 s into the job, after Python has started
    (a signal before would kill the job), and at least one check, 30 s, before the check that
    would end it. A callback paces the job's first run to 25 ms an iteration (100 s), so it is
    still training then. The run checkpoints first, then submitit's handler requeues the job
    (``max_num_timeout`` allows it); the job runs again, at full speed, and resumes in its
    folder."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    (tmp_path / "pace.py").write_text(
        "import os\nimport time\n\ndef pace(trainer):\n"
        "    if os.environ.get('SLURM_RESTART_COUNT', '0') == '0':\n        time.sleep(0.025)\n")
    sweep = tmp_path / "sweep"
    chosen = launcher_config(tmp_path / "conf", partition="debug", timeout_min=1, signal_delay_s=10,
                             max_num_timeout=3, cpus_per_task=1)
    proc = subprocess.Popen([sys.executable, "-m", "trainer_run.cli", "-m", *chosen, *LONG,
                             "+callbacks.pace._target_=pace.pace",
                             "+callbacks.pace._partial_=true", f"hydra.sweep.dir={sweep}"],
                            env={**slurm.env, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said, _ = proc.communicate(timeout=400)
    finally:
        proc.kill()
    assert proc.returncode == 0, said
    (job_id,) = submitit_jobs(sweep)
    job = _finished(slurm, job_id)
    assert job["JobState"] == "COMPLETED" and int(job["Restarts"]) >= 1, job
    logs = "".join(p.read_text() for p in (sweep / ".submitit").rglob("*_log.*"))
    assert "job 0: resuming" in logs, logs
    assert_same_model_and_metrics(sweep / "0", uninterrupted)


def test_a_sweep_job_submitit_will_not_requeue_ends_interrupted_and_the_sweep_run_again_finishes_it(
        slurm, tmp_path, uninterrupted):
    """With ``timeout_min`` 10 submitit counts any signal as the time limit, and with
    ``max_num_timeout`` 0 it declines to requeue: the run says so, the job ends ``interrupted``
    with its value (the sweep's table has it; nothing hangs waiting for a result), and the same
    sweep run again resumes the job to the end, bit for bit."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweep = tmp_path / "sweep"
    command = [sys.executable, "-m", "trainer_run.cli", "-m", "hydra/launcher=submitit_slurm",
               "hydra.launcher.partition=debug", "hydra.launcher.timeout_min=10",
               "hydra.launcher.cpus_per_task=1", *LONG, f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen(command, env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        _halfway(sweep)
        (job_id,) = submitit_jobs(sweep)
        assert slurm.run(["scancel", "--signal=USR2", job_id]).returncode == 0
        said, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    logs = "".join(p.read_text() for p in (sweep / ".submitit").rglob("*_log.err"))
    assert ("warning: SIGUSR2: submitit did not requeue the job (Job not requeued because: timed-out too "
            "many times.); run the sweep again to continue it") in logs, logs
    (row,) = csv.DictReader((sweep / "results.csv").open())
    assert row["status"] == "interrupted", (row, said)
    again = slurm.run(command, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    (row,) = csv.DictReader((sweep / "results.csv").open())
    assert row["status"] == "max_iterations", row  # completed, at its iteration limit
    assert_same_model_and_metrics(sweep / "0", uninterrupted)
