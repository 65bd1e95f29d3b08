"""``mpiexec -n N trainer-run kvstore=dist_*``: two processes of batch b equal one process of
batch 2b, only rank 0 writes, every rank resumes from rank 0's checkpoint; dist_async trains
with a server rank; a signal, an error, a death or a stuck rank stops them all with the exit
status the README gives, and the last checkpoint resumes; a resume with another number of
processes, or a dist store without mpiexec, says so."""

import contextlib
import importlib.util
import json
import os
import re
import signal
import sys
from pathlib import Path

import numpy
import pytest
from helpers import load_npz, read_jsonl, run_cli
from mpi_jobs import SCRIPTS, run

from trainer_run.storage import checkpoint

COMMON = ("optimizer=sgd", "optimizer.momentum=0.9", "trainer.progress=false", "trainer.log_interval=10",
          "trainer.eval_interval=10", "trainer.checkpoint_interval=10")


def trainer_run(mpiexec, n, *args):  # noqa: F811
    code, out = run([mpiexec, "-n", str(n), sys.executable, "-m", "trainer_run.cli", *COMMON, *args],
                    timeout=120)
    assert code == 0, out
    return out


def assert_equals_one_process_of_batch_50(two: Path, one: Path) -> None:
    """The model of the 2-rank run in ``two`` (batch 25 each, 30 iterations) equals, to float32
    rounding, one process of batch 50 trained into ``one``."""
    single = run_cli(*COMMON, "dataset.batch_size=50", "trainer.max_iterations=30", f"hydra.run.dir={one}")
    assert single.returncode == 0, single.stderr
    ranks, alone = load_npz(two / "model.npz"), load_npz(one / "model.npz")
    for k in alone:
        numpy.testing.assert_allclose(ranks[k], alone[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.mpi
@pytest.mark.parametrize("updater", [(), ("updater=parallel", "updater.devices=2")],
                         ids=["standard", "parallel"])
def test_two_processes_of_batch_25_equal_one_process_of_batch_50(mpiexec, tmp_path, updater):  # noqa: F811
    """With updater=parallel each process also splits its shard over 2 replicas."""
    trainer_run(mpiexec, 2, "kvstore=dist_sync", "dataset.batch_size=25", "trainer.max_iterations=30",
                *updater, f"hydra.run.dir={tmp_path / 'two'}")
    assert_equals_one_process_of_batch_50(tmp_path / "two", tmp_path / "one")
    rows_two = read_jsonl(tmp_path / "two" / "metrics.jsonl")
    rows_one = read_jsonl(tmp_path / "one" / "metrics.jsonl")
    assert [r["iteration"] for r in rows_two] == [10, 20, 30]  # one writer: no duplicated rows
    for a, b in zip(rows_two, rows_one):
        assert a["epoch"] == b["epoch"]
        assert a["train/loss"] == pytest.approx(b["train/loss"], rel=1e-5)  # the global batch's
        assert a["val/accuracy"] == pytest.approx(b["val/accuracy"], rel=1e-6)


@pytest.mark.mpi
def test_every_rank_resumes_from_rank_0s_checkpoint(mpiexec, tmp_path):  # noqa: F811
    common = ("kvstore=dist_sync", "dataset.batch_size=25")
    trainer_run(mpiexec, 2, *common, "trainer.max_iterations=30", f"hydra.run.dir={tmp_path / 'straight'}")
    trainer_run(mpiexec, 2, *common, "trainer.max_iterations=10", f"hydra.run.dir={tmp_path / 'cut'}")
    trainer_run(mpiexec, 2, f"resume={tmp_path / 'cut'}", "trainer.max_iterations=30")
    a, b = load_npz(tmp_path / "straight" / "model.npz"), load_npz(tmp_path / "cut" / "model.npz")
    for k in a:
        numpy.testing.assert_array_equal(a[k], b[k])


# -- dist_async: a server rank and two workers -----------------------------------------------
ASYNC = ("kvstore=dist_async", "trainer.progress=false", "trainer.log_interval=100",
         "trainer.eval_interval=100", "trainer.checkpoint_interval=100")


def launch_cli(mpiexec, n, *args, timeout=120, hang_ok=False):  # noqa: F811
    """``mpiexec -n n trainer-run <args>`` with ``tests/mpi`` importable (faults.Fault)."""
    return run(["env", f"PYTHONPATH={SCRIPTS}", mpiexec, "-n", str(n), sys.executable, "-m",
                "trainer_run.cli", *args], timeout=timeout, hang_ok=hang_ok)


def optimizer_counts(run_dir: Path) -> int:
    """The optimizer's ``num_update`` in the run's latest checkpoint."""
    state = checkpoint.load(checkpoint.find(run_dir))
    return state["trainer"]["updater"]["optimizers"]["main"]["num_update"]


@pytest.mark.mpi
def test_dist_async_two_workers_train_the_default_model(mpiexec, tmp_path):  # noqa: F811
    """The default model and optimizer (Adam) on 2 workers + 1 server; the checkpoints hold
    the server's optimizer, which counted both workers' pushes."""
    out = tmp_path / "async"
    code, log = launch_cli(mpiexec, 3, *ASYNC, "trainer.max_iterations=600", f"hydra.run.dir={out}")
    assert code == 0, log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["val/accuracy"] >= 0.9, summary
    assert [r["iteration"] for r in read_jsonl(out / "metrics.jsonl")] == [100, 200, 300, 400, 500, 600]
    assert 600 < optimizer_counts(out) <= 1200  # worker 0's 600 pushes and some of worker 1's


@pytest.mark.mpi
def test_dist_async_resume_gives_the_server_its_optimizer_back(mpiexec, tmp_path):  # noqa: F811
    out = tmp_path / "async"
    code, log = launch_cli(mpiexec, 3, *ASYNC, "trainer.max_iterations=100", f"hydra.run.dir={out}")
    assert code == 0, log
    counted = optimizer_counts(out)
    assert counted > 100
    code, log = launch_cli(mpiexec, 3, f"resume={out}", "trainer.max_iterations=200")
    assert code == 0, log
    # without the checkpoint's counters the server would count from 0, to at most 2 x 100
    assert optimizer_counts(out) >= counted + 100


# -- one rank stops: the others follow ----------------------------------------------------------
def fault(rank: int, at: int, kind: str, wait_for: Path | None = None,
          pid_file: Path | None = None, to: int | None = None, log: Path | None = None,
          seconds: float | None = None) -> str:
    wait = f", wait_for: '{wait_for}'" if wait_for else ""
    wait += f", pid_file: '{pid_file}'" if pid_file else ""
    wait += f", to: {to}" if to is not None else ""
    wait += f", log: '{log}'" if log else ""
    wait += f", seconds: {seconds}" if seconds is not None else ""
    return (f"updater.callbacks.update_on_finish="
            f"{{_target_: faults.Fault, rank: {rank}, at: {at}, kind: {kind}{wait}}}")


def kill_left_over(pid_file: Path, run_dir: Path) -> None:
    """SIGKILLs the process whose pid the fault wrote, if it is still one of this test's
    ranks (its command line names ``run_dir``): a stopped rank must not outlive the test."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text())
        if str(run_dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def checkpoints(run_dir: Path) -> list[int]:
    """The iterations of the run's checkpoints, each verified."""
    found = sorted((run_dir / "checkpoints").glob("iter_*"))
    for path in found:
        checkpoint.verify(path)
    return [int(p.name.split("_")[1]) for p in found]


@pytest.fixture(scope="module")
def straight(mpiexec, tmp_path_factory):  # noqa: F811
    """The model of an uninterrupted 2-rank dist_sync run of 30 iterations (run once for the
    module: the tests only read it)."""
    out = tmp_path_factory.mktemp("straight")
    trainer_run(mpiexec, 2, "kvstore=dist_sync", "dataset.batch_size=25", "trainer.max_iterations=30",
                f"hydra.run.dir={out}")
    return load_npz(out / "model.npz")


def resume_equals(mpiexec, run_dir, straight):  # noqa: F811
    """Resumes (without the fault) to iteration 30 and compares with the straight run."""
    code, log = launch_cli(mpiexec, 2, f"resume={run_dir}", "trainer.max_iterations=30",
                           "updater.callbacks.update_on_finish=null")
    assert code == 0, log
    resumed = load_npz(run_dir / "model.npz")
    for k in straight:
        numpy.testing.assert_array_equal(resumed[k], straight[k], err_msg=k)


@pytest.mark.mpi
def test_a_signal_to_one_rank_stops_both_after_the_same_iteration(mpiexec, tmp_path, straight):  # noqa: F811
    """SIGTERM to rank 1 alone during update 13: the request travels with update 14's metrics,
    both ranks stop after it, rank 0 saves that iteration, both exit 143; resuming gives the
    uninterrupted run's model bit for bit."""
    out = tmp_path / "cut"
    code, log = launch_cli(mpiexec, 2, *COMMON, "kvstore=dist_sync", "dataset.batch_size=25",
                           "trainer.max_iterations=30", fault(1, 12, "sigterm"), f"hydra.run.dir={out}")
    assert code == 143, log
    assert checkpoints(out) == [10, 14]
    assert json.loads((out / "summary.json").read_text())["status"] == "interrupted"
    resume_equals(mpiexec, out, straight)


@pytest.mark.mpi
def test_a_time_limit_on_rank_0_alone_stops_both_after_the_same_iteration(mpiexec, tmp_path, straight):  # noqa: F811
    """Rank 0 sleeps 2.5 s at the end of update 13, after the gradient sum: its clock has
    crossed trainer.max_time=2 after update 13, rank 1's need not have. The decision travels
    with update 14's metrics, both ranks end after it (at the latest), rank 0 saves that
    iteration, the job exits 0 (a rank ending alone would leave the other waiting in the next
    sum); resuming without the limit gives the uninterrupted run's model bit for bit."""
    out = tmp_path / "cut"
    code, log = launch_cli(mpiexec, 2, *COMMON, "kvstore=dist_sync", "dataset.batch_size=25",
                           "trainer.max_iterations=30", "trainer.max_time=2",
                           fault(0, 12, "sleep", seconds=2.5), f"hydra.run.dir={out}")
    assert code == 0, log
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["status"], summary["stop_reason"]) == ("completed", "max_time"), log
    assert summary["iteration"] <= 14 and checkpoints(out)[-1] == summary["iteration"]
    code, log = launch_cli(mpiexec, 2, f"resume={out}", "trainer.max_time=null",
                           "updater.callbacks.update_on_finish=null")
    assert code == 0, log
    resumed = load_npz(out / "model.npz")
    for k in straight:
        numpy.testing.assert_array_equal(resumed[k], straight[k], err_msg=k)


@pytest.mark.mpi
def test_global_norm_clipping_on_2_processes_equals_1_of_the_global_batch(mpiexec, tmp_path, straight):  # noqa: F811
    """updater.clip_global_norm clips the sum over both processes: 2 processes of batch 25
    equal 1 of batch 50, and differ from the unclipped run (it clipped)."""
    clip = ("trainer.max_iterations=30", "updater.clip_global_norm=0.05")
    trainer_run(mpiexec, 2, "kvstore=dist_sync", "dataset.batch_size=25", *clip,
                f"hydra.run.dir={tmp_path / 'two'}")
    single = run_cli(*COMMON, "dataset.batch_size=50", *clip, f"hydra.run.dir={tmp_path / 'one'}")
    assert single.returncode == 0, single.stderr
    two, one = load_npz(tmp_path / "two" / "model.npz"), load_npz(tmp_path / "one" / "model.npz")
    for k in one:
        numpy.testing.assert_allclose(two[k], one[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert not numpy.allclose(two["l1/W"], straight["l1/W"], rtol=1e-3)


@pytest.mark.mpi
def test_clipping_by_global_norm_with_dist_async_is_refused_in_one_line(mpiexec, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    code, log = launch_cli(mpiexec, 3, *ASYNC, "updater.clip_global_norm=1", f"hydra.run.dir={out}")
    assert code == 2, log
    assert "error: updater.clip_global_norm needs every gradient" in log and not out.exists()


@pytest.mark.mpi
def test_an_error_on_one_rank_stops_the_other_at_once(mpiexec, tmp_path, straight):  # noqa: F811
    """Rank 1 raises in update 13; rank 0, waiting for it in the gradient sum, is told why
    (not after the 100 s timeout) and stops; iteration 10's checkpoint resumes."""
    out = tmp_path / "cut"
    code, log = launch_cli(mpiexec, 2, *COMMON, "kvstore=dist_sync", "kvstore.timeout=100",
                           "dataset.batch_size=25", "trainer.max_iterations=30", fault(1, 12, "raise"),
                           f"hydra.run.dir={out}", timeout=60)
    assert code == 1, log
    assert "\nRuntimeError: injected fault on rank 1 at iteration 12\n" in log, log  # rank 1's traceback
    assert ("rank 1 stopped: updater.callbacks.update_on_finish (faults.Fault) raised "
            "RuntimeError: injected fault on rank 1 at iteration 12") in log, log
    assert checkpoints(out) == [10]
    resume_equals(mpiexec, out, straight)


@pytest.mark.mpi
def test_a_killed_rank_ends_the_job_and_the_last_checkpoint_resumes(mpiexec, tmp_path, straight):  # noqa: F811
    """Rank 1 is killed in update 23. Checkpoints are written in the background: iteration 20's
    may still be in flight and is then lost, but iteration 10's is complete (the loop waited
    for it before handing over iteration 20's); the latest complete one resumes."""
    out = tmp_path / "cut"
    code, log = launch_cli(mpiexec, 2, *COMMON, "kvstore=dist_sync", "dataset.batch_size=25",
                           "trainer.max_iterations=30", fault(1, 22, "sigkill"), f"hydra.run.dir={out}",
                           timeout=60)
    assert code == 9, log  # mpiexec ends the job and exits with the signal's number
    assert checkpoints(out) in ([10], [10, 20])
    resume_equals(mpiexec, out, straight)


@pytest.mark.mpi
def test_a_stopped_rank_ends_the_job_once_rank_0_has_given_up(mpiexec, tmp_path, straight):  # noqa: F811
    """Rank 1 stops itself (SIGSTOP) after update 13: rank 0 gives up after kvstore.timeout=5 s,
    says so, writes its summary and aborts the job with status 1; before, MPI_Finalize waited
    for the stopped rank forever. Iteration 10's checkpoint resumes.

    About one run in ten, MPICH's mpiexec does not end after rank 0's MPI_Abort while rank 1
    is stopped (its process manager's, not ours): rank 0 has then said so, called MPI_Abort
    and written its summary, which the test checks; it kills the job itself."""
    out, pid_file = tmp_path / "cut", tmp_path / "stopped.pid"
    try:
        code, log = launch_cli(mpiexec, 2, *COMMON, "kvstore=dist_sync", "kvstore.timeout=5",
                               "dataset.batch_size=25", "trainer.max_iterations=100000",
                               fault(1, 12, "sigstop", pid_file=pid_file), f"hydra.run.dir={out}",
                               timeout=45, hang_ok=True)
    finally:
        kill_left_over(pid_file, out)
    assert code == 1 or code is None and "application called MPI_Abort(" in log, log
    assert ("error: kvstore dist_sync: rank 0 waited 5 s for the other 1 rank(s) in the sum of "
            "key 0; a rank has stopped") in log, log
    assert json.loads((out / "summary.json").read_text())["status"] == "failed"
    assert checkpoints(out) == [10]
    resume_equals(mpiexec, out, straight)


@pytest.mark.mpi
def test_a_disk_error_on_rank_0_ends_every_rank_with_its_status_4(mpiexec, tmp_path):  # noqa: F811
    """Rank 0's disk is full from update 13 on, so its next write of the run fails (ENOSPC):
    the job ends with rank 0's 4, the largest (mpiexec alone would report 4 | 1 = 5), and the
    checkpoint of iteration 10 stays the last."""
    out = tmp_path / "cut"
    code, log = launch_cli(mpiexec, 2, *COMMON, "kvstore=dist_sync", "dataset.batch_size=25",
                           "trainer.max_iterations=30",
                           fault(0, 12, "enospc", out / "checkpoints" / "latest", seconds=0.5),
                           f"hydra.run.dir={out}",
                           timeout=60)
    assert code == 4, log
    assert re.search(r"error: cannot write \S+: No space left on device", log), log
    assert checkpoints(out) == [10]


@pytest.mark.mpi
def test_an_error_on_one_async_worker_stops_the_job(mpiexec, tmp_path):  # noqa: F811
    """Worker 1 raises (once worker 0 has saved iteration 100); the server tells worker 0 at
    its next exchange, both stop, the checkpoint of iteration 100 stays valid. (Every
    checkpoint is kept: worker 0 may run ahead of worker 1 and would prune iteration 100.)"""
    out = tmp_path / "async"
    saved = out / "checkpoints" / "iter_00000100"
    code, log = launch_cli(mpiexec, 3, *ASYNC, "kvstore.timeout=100", "trainer.max_iterations=1000",
                           "trainer.keep_checkpoints=null",
                           fault(1, 150, "raise", saved), f"hydra.run.dir={out}", timeout=60)
    assert code == 1, log
    assert ("worker 1 stopped: updater.callbacks.update_on_finish (faults.Fault) raised "
            "RuntimeError: injected fault on rank 1 at iteration 150") in log, log
    assert checkpoints(out)[0] == 100


@pytest.mark.mpi
@pytest.mark.parametrize("to", [0, 1, 2], ids=["rank-0", "worker-1", "server"])
def test_a_signal_to_any_async_rank_stops_every_worker_after_the_same_iteration(mpiexec, tmp_path, to):  # noqa: F811
    """SIGTERM to one rank (worker 0, worker 1 or the server) after worker 0's update 40 of
    100000: the workers agree on the furthest iteration either has finished, the one behind
    trains on to it, both stop after it (before, the others trained on to the end), worker 0
    saves it, and every rank exits 143."""
    out, log_dir = tmp_path / "async", tmp_path / "log"
    log_dir.mkdir()
    code, log = launch_cli(mpiexec, 3, *ASYNC, "trainer.max_iterations=100000",
                           fault(0, 39, "sigterm", to=to, log=log_dir), f"hydra.run.dir={out}",
                           timeout=60)
    assert code == 143, log
    last = [int((log_dir / f"rank{r}").read_text()) for r in (0, 1)]
    assert last[0] == last[1] >= 40, log
    assert checkpoints(out)[-1] == last[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["iteration"] == last[0]
    assert f"interrupted at iteration {last[0]}" in log, log


# -- a dist store without mpiexec, a resume with another number of processes ------------------
def single_process_warning(store: str) -> str:
    return (f"warning: kvstore={store}: this run has a single process because it was not started "
            f"by mpiexec; to train on N processes, start it with mpiexec -n N trainer-run "
            f"kvstore={store} ...")


def test_a_dist_store_without_mpiexec_warns_once_and_trains_one_process(tmp_path):
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed")
    out = tmp_path / "run"
    done = run_cli(*COMMON, "kvstore=dist_sync", "trainer.max_iterations=10", f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [single_process_warning("dist_sync")]
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"
    assert [r["iteration"] for r in read_jsonl(out / "metrics.jsonl")] == [10]


def start(mpiexec, n: int, *args) -> str:  # noqa: F811
    """``trainer-run <args>`` as n processes under mpiexec, or as one without it (n = 1);
    returns what it printed."""
    if n > 1:
        return trainer_run(mpiexec, n, *args)
    done = run_cli(*COMMON, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("before, after", [(2, 1), (1, 2)])
def test_a_resume_with_another_number_of_processes_warns_once_and_goes_on(mpiexec, tmp_path,  # noqa: F811
                                                                          before, after):
    """The checkpoint records the number of workers; a resume with another number says both
    counts and both global batches once (on rank 0), then trains on to the limit."""
    out = tmp_path / "run"
    start(mpiexec, before, "kvstore=dist_sync", "dataset.batch_size=25", "trainer.max_iterations=10",
          f"hydra.run.dir={out}")
    log = start(mpiexec, after, f"resume={out}", "kvstore=dist_sync", "trainer.max_iterations=20")
    expected = (f"warning: the checkpoint was written by {before} worker process(es), this run has "
                f"{after}: the global batch changes from {25 * before} to {25 * after} examples (25 "
                f"per worker), so the resumed run is not the same run and not bit-identical to one "
                f"that went on with {before}")
    assert [line for line in log.splitlines() if "the checkpoint was written by" in line] == [expected]
    state = checkpoint.load(checkpoint.find(out))["trainer"]["updater"]
    assert (state["iteration"], state["num_workers"]) == (20, after)


@pytest.mark.parametrize("args, message", [
    ((), "error: kvstore=dist_async needs at least 2 processes, 1 server and 1 worker, got 1; "
         "launch it with e.g. mpiexec -n 3"),
    (("kvstore.update_on_kvstore=false",), "error: Please set kvstore.update_on_kvstore=true (or "
                                           "leave it unset) when training in async mode"),
])
def test_dist_async_mistakes_exit_2_with_one_line(tmp_path, args, message):
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed")
    done = run_cli("kvstore=dist_async", *args, f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "checkpoints").exists()
