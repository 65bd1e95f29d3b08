"""MPI across hosts: ranks on different hosts (network namespaces, see ``cluster_hosts.py``)
talking over TCP keep the promises the single-host tests make.

Run them with ``pytest -m cluster`` as root (they make network namespaces); they skip where
namespaces cannot be made or MPI is missing."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy
import pytest
from cluster_hosts import GONE, Hosts, available
from helpers import load_npz, run_cli
from mpi_jobs import run

from tests.command.test_cli_compression import COMPRESSED
from tests.command.test_cli_dist import ASYNC, COMMON, assert_equals_one_process_of_batch_50
from trainer_run.storage import checkpoint

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def hosts(tmp_path_factory, mpiexec):  # noqa: F811
    why = available()
    if why is not None:
        pytest.skip(why)
    with Hosts(3, tmp_path_factory.mktemp("hosts")) as made:
        yield made


def test_dist_sync_one_rank_on_each_of_two_hosts_equals_one_process_of_the_doubled_batch(
        hosts, mpiexec, tmp_path):  # noqa: F811
    """Rank 0 on node1, rank 1 on node2, batch 25 each, equal one process of batch 50 within the
    single-host test's tolerance; the gradients crossed node2's link (its eth0 received at least
    one float32 gradient of the model per iteration)."""
    before = hosts.received("node2")
    code, out = run(hosts.mpiexec(mpiexec, ["node1", "node2"],
                                  [sys.executable, "-m", "trainer_run.cli", *COMMON, "kvstore=dist_sync",
                                   "dataset.batch_size=25", "trainer.max_iterations=30",
                                   f"hydra.run.dir={tmp_path / 'two'}"]), timeout=180)
    assert code == 0, out
    assert_equals_one_process_of_batch_50(tmp_path / "two", tmp_path / "one")
    gradient_bytes = 4 * sum(v.size for v in load_npz(tmp_path / "one" / "model.npz").values())
    assert hosts.received("node2") - before >= 30 * gradient_bytes


def test_dist_async_with_its_server_and_two_workers_on_three_hosts_learns(hosts, mpiexec, tmp_path):  # noqa: F811
    """Worker 0 on node1, worker 1 on node2, the server (the last rank) on node3: the default
    model reaches the single-host test's accuracy, and the server's link carried the pushes."""
    before = hosts.received("node3")
    out = tmp_path / "async"
    code, log = run(hosts.mpiexec(mpiexec, ["node1", "node2", "node3"],
                                  [sys.executable, "-m", "trainer_run.cli", *ASYNC,
                                   "trainer.max_iterations=600", f"hydra.run.dir={out}"]), timeout=240)
    assert code == 0, log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["val/accuracy"] >= 0.9, summary
    assert hosts.received("node3") - before >= 600 * 2 * 4 * 1000  # 2 workers' pushes, > 1k params


def test_a_host_cut_off_mid_run_ends_the_job_and_the_run_resumes_on_the_other(hosts, mpiexec, tmp_path):  # noqa: F811
    """node2's link goes down once the first checkpoint is written: rank 0 on node1 gives up
    after kvstore.timeout, says so in one line, writes its summary (failed) and ends with the
    job's abort; the last complete checkpoint verifies, and the run resumes on node1 alone to a
    later iteration. (MPICH's mpiexec itself waits on for the lost host's process manager
    until TCP gives up on it: the test ends it.)"""
    out = tmp_path / "cut"
    command = hosts.mpiexec(mpiexec, ["node1", "node2"],
                            [sys.executable, "-m", "trainer_run.cli", *COMMON, "kvstore=dist_sync",
                             "kvstore.timeout=5", "dataset.batch_size=25",
                             "trainer.max_iterations=1000000", f"hydra.run.dir={out}"])
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list((out / "checkpoints").glob("iter_*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        hosts.cut("node2")
        cut_at = time.monotonic()
        while hosts.processes("node1", sys.executable, "trainer_run.cli") and time.monotonic() < cut_at + 30:
            time.sleep(0.1)
        rank_0_ended = time.monotonic() - cut_at
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        hosts.mend("node2")
    log, _ = job.communicate()
    assert rank_0_ended < 5 + 15, log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed", log
    assert "error: kvstore dist_sync: rank 0 waited 5 s for the other 1 rank(s)" in log, log
    last = max(int(p.name.split("_")[1]) for p in (out / "checkpoints").glob("iter_*"))
    checkpoint.verify(checkpoint.find(out))
    resumed = run_cli(f"resume={out}", f"trainer.max_iterations={last + 20}")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "summary.json").read_text())["iteration"] == last + 20


def test_compressed_gradients_across_hosts_equal_the_single_host_run(hosts, mpiexec, tmp_path):  # noqa: F811
    """2-bit compression with one rank on each of two hosts gives the bits of the same job on
    one host (each rank quantizes with its own residual; the sum order is the same)."""
    args = [sys.executable, "-m", "trainer_run.cli", "kvstore=dist_sync", "dataset.batch_size=25",
            "trainer.progress=false", "trainer.max_iterations=200", *COMPRESSED]
    across_hosts = hosts.mpiexec(mpiexec, ["node1", "node2"], [*args, f"hydra.run.dir={tmp_path / 'hosts'}"])
    code, out = run(across_hosts, timeout=180)
    assert code == 0, out
    code, out = run([mpiexec, "-n", "2", *args, f"hydra.run.dir={tmp_path / 'one'}"], timeout=180)
    assert code == 0, out
    across, local = load_npz(tmp_path / "hosts" / "model.npz"), load_npz(tmp_path / "one" / "model.npz")
    for k in local:
        numpy.testing.assert_array_equal(across[k], local[k], err_msg=k)


def test_trainer_run_hosts_runs_one_rank_per_slot_and_equals_one_process_of_the_doubled_batch(
        hosts, mpiexec, tmp_path):  # noqa: F811
    """``trainer-run --hosts FILE`` checks the hosts, then starts the ranks with mpiexec: the same
    run as the mpiexec test above."""
    argv = [*COMMON, "kvstore=dist_sync", "dataset.batch_size=25", "trainer.max_iterations=30",
            f"hydra.run.dir={tmp_path / 'two'}"]
    code, out = run(hosts.trainer_run(["node1", "node2"], argv), timeout=180)
    assert code == 0, out
    assert_equals_one_process_of_batch_50(tmp_path / "two", tmp_path / "one")


def _one_line(code, out) -> str:
    lines = out.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, out)
    return lines[0]


ON_TWO = ("kvstore=dist_sync", "trainer.max_iterations=30")


def test_a_host_file_naming_an_unknown_host_is_one_line_and_nothing_is_written(hosts, tmp_path):
    code, out = run(hosts.trainer_run(["node1", "nodeq"], [*ON_TWO, f"hydra.run.dir={tmp_path / 'run'}"]))
    line = _one_line(code, out)
    assert line.startswith(f"error: host file {hosts.workdir / 'hostfile'} names nodeq, which does not "
                           "resolve to an address"), line
    assert not (tmp_path / "run").exists()


def test_a_host_that_is_down_is_one_line_and_nothing_is_written(hosts, tmp_path):
    code, out = run(hosts.trainer_run(["node1", GONE], [*ON_TWO, f"hydra.run.dir={tmp_path / 'run'}"]))
    line = _one_line(code, out)
    assert line.startswith(f"error: cannot start a process on {GONE} with netns-launcher ("), line
    assert line.endswith(f"so 'netns-launcher {GONE} true' must work, without a password"), line
    assert not (tmp_path / "run").exists()


def test_a_host_whose_processes_cannot_connect_back_is_one_line_and_nothing_is_written(hosts, tmp_path):
    """node2 is up for its launcher but its network is down: a rank there could not reach node1."""
    hosts.cut("node2")
    try:
        code, out = run(hosts.trainer_run(["node1", "node2"], [*ON_TWO, f"hydra.run.dir={tmp_path / 'run'}"]))
    finally:
        hosts.mend("node2")
    line = _one_line(code, out)
    assert line == ("error: a process on node2 cannot connect to node1 (this host) over TCP: Network is "
                    "unreachable; the ranks connect to each other: check the network and firewalls "
                    "between the hosts"), line
    assert not (tmp_path / "run").exists()
