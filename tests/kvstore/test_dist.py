"""The MPI kvstores: dist_sync, dist_device_sync and dist_async across processes.

Each ``mpi`` test launches ``mpiexec`` on a script in ``tests/mpi/``; every rank writes what it
saw to ``rank<r>.npz`` and the test checks the files. Run them with ``pytest -m mpi``; they
skip when mpi4py or an ``mpiexec`` that starts its MPI is missing.
"""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from trainer_run.errors import ConfigError
from trainer_run.kvstore import dist

SCRIPTS = Path(__file__).parent.parent / "mpi"
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


@pytest.fixture(scope="module")
def mpiexec():
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed: pip install 'trainer-run[mpi]'")
    here = Path(sys.executable).parent / "mpiexec"
    exe = str(here) if here.exists() else shutil.which("mpiexec")
    if exe is None:
        pytest.skip("no mpiexec next to this Python or on PATH: pip install 'trainer-run[mpi]'")
    code, out = run([exe, "-n", "2", sys.executable, "-c",
                     "from mpi4py import MPI; print(f'size={MPI.COMM_WORLD.Get_size()};')"])
    if code != 0 or out.count("size=2;") != 2:
        pytest.skip(f"{exe} does not start 2 ranks of mpi4py's MPI (exit {code}): {out[-500:]}")
    return exe


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


IGNORE_SPARSE = "ValueError: dist kvstore pull doesn't support ignore_sparse=False"
NOT_INITED = "ValueError: kvstore key {0} has not been inited: call init({0}, value) first"


# -- without MPI ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [dist.DistSyncKVStore, dist.DistDeviceSyncKVStore, dist.DistAsyncKVStore])
def test_missing_mpi4py_is_a_config_error(cls, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py now raises ImportError
    with pytest.raises(ConfigError) as e:
        cls()
    assert str(e.value) == (f"kvstore={cls.type} needs mpi4py and an MPI; install them with "
                            f"pip install 'trainer-run[mpi]'")


def test_bad_arguments_before_mpi(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ConfigError, match="kvstore timeout must be > 0, got 0"):
        dist.DistSyncKVStore(timeout=0)
    with pytest.raises(ConfigError, match="kvstore timeout must be a number, got 'long'"):
        dist.DistAsyncKVStore(timeout="long")
    with pytest.raises(ConfigError, match="kvstore cuda_aware must be true, false or null"):
        dist.DistDeviceSyncKVStore(cuda_aware="yes")


def test_types():
    assert {name: cls.type for name, cls in dist.TYPES.items()} == {
        "dist_sync": "dist_sync", "dist_device_sync": "dist_device_sync", "dist_async": "dist_async"}


# -- dist_sync, dist_device_sync ------------------------------------------------------------
TYPES = ["dist_sync", "dist_device_sync"]


@pytest.fixture(scope="module", params=[2, 3], ids=["2ranks", "3ranks"])
def sync_run(request, mpiexec, tmp_path_factory):
    n = request.param
    return n, launch(mpiexec, n, "sync_checks.py", tmp_path_factory.mktemp(f"sync{n}"))


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_ranks(sync_run, t):
    n, seen = sync_run
    assert [int(s[f"{t}.rank"]) for s in seen] == list(range(n))
    assert {int(s[f"{t}.num_workers"]) for s in seen} == {n}


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_init_keeps_rank_0s_value(sync_run, t):
    _, seen = sync_run
    for s in seen:  # rank r inits r + 1
        numpy.testing.assert_array_equal(s[f"{t}.init"], numpy.ones((2, 3)))


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_sums_the_list_then_the_ranks(sync_run, t):
    n, seen = sync_run
    a = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    total = sum(r + 1 for r in range(n))  # rank r pushes (r + 1) * a
    for s in seen:
        numpy.testing.assert_array_equal(s[f"{t}.push_pull"], 11 * total * a)  # [a, 10 a] each
        numpy.testing.assert_array_equal(s[f"{t}.pushpull"], total * a)
        numpy.testing.assert_array_equal(s[f"{t}.pushpull_inplace"], total * a)
        numpy.testing.assert_array_equal(s[f"{t}.after"], [n, n, n])


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_several_keys_and_float16(sync_run, t):
    n, seen = sync_run
    for k, size in {1: 1, 2: 1000, 3: 100_003}.items():
        expected = sum(numpy.arange(size, dtype=numpy.float32) % 7 + r for r in range(n))
        for s in seen:
            numpy.testing.assert_array_equal(s[f"{t}.key{k}"], expected)
    expected = sum((numpy.arange(513) % 11 - 5 + r).astype(numpy.float16) for r in range(n))
    for s in seen:
        assert s[f"{t}.float16"].dtype == numpy.float16
        numpy.testing.assert_array_equal(s[f"{t}.float16"], expected)


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_every_rank_gets_the_same_bytes(sync_run, t):
    _, seen = sync_run  # random float32 spanning 6 decades: the sum's rounding is at stake
    assert len({str(s[f"{t}.digest"]) for s in seen}) == 1


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_barrier_waits_for_the_last_rank(sync_run, t):
    _, seen = sync_run  # rank 1 sleeps 0.3 s before its barrier
    assert min(float(s[f"{t}.barrier_out"]) for s in seen) >= max(float(s[f"{t}.barrier_in"]) for s in seen)


@pytest.mark.mpi
@pytest.mark.parametrize("t", TYPES)
def test_sync_refusals(sync_run, t):
    _, seen = sync_run
    for s in seen:
        assert str(s[f"{t}.ignore_sparse"]) == IGNORE_SPARSE
        assert str(s[f"{t}.dtype"]).startswith("ValueError: kvstore key 0: Output buffer dtype is "
                                               "different: pushpull into float64, the key holds float32")
        assert str(s[f"{t}.before_init"]) == NOT_INITED.format(6)
        assert str(s[f"{t}.twice"]).startswith("ValueError: duplicate init of kvstore key 0")
        assert str(s[f"{t}.mismatch"]).startswith(  # every rank raises the same error
            f"ValueError: kvstore {t} init: the ranks do not init the same keys with the same shapes and "
            f"dtypes: rank 0 inits [7: float64[3]], rank 1 inits [7: float64[4]]")


@pytest.mark.mpi
def test_sync_without_timeout_blocks_in_mpi(sync_run):
    n, seen = sync_run  # timeout=None: MPI_Bcast / MPI_Allreduce / MPI_Barrier
    for s in seen:
        numpy.testing.assert_array_equal(s["blocking.init"], numpy.full(5, 7))
        numpy.testing.assert_array_equal(s["blocking.sum"], numpy.full(5, n * (n + 1) // 2))


@pytest.mark.mpi
def test_sync_dead_rank_stops_the_others(mpiexec, tmp_path):
    seen = launch(mpiexec, 2, "failures.py", tmp_path, "sync_dead")
    assert seen[1] is None  # it exited
    message = ("RunStopped: kvstore dist_sync: rank 0 waited 2 s for the other 1 rank(s) in the sum "
               "of key 0; a rank has stopped (crashed, or exited without reaching it) or is stuck")
    assert str(seen[0]["error"]).startswith(message)
    assert str(seen[0]["again"]).startswith(message)  # and the store stays stopped
    assert 2.0 <= float(seen[0]["seconds"]) < 10


# -- dist_async -----------------------------------------------------------------------------
LR = 0.5


@pytest.fixture(scope="module")
def async_run(mpiexec, tmp_path_factory):
    return launch(mpiexec, 3, "async_sgd.py", tmp_path_factory.mktemp("async"))


@pytest.mark.mpi
def test_async_the_last_rank_serves(async_run):
    w0, w1, server = async_run
    assert [bool(s["is_server"]) for s in async_run] == [False, False, True]
    assert [int(s["num_workers"]) for s in async_run] == [2, 2, 2]  # the server is no worker
    assert (int(w0["rank"]), int(w1["rank"])) == (0, 1)
    assert str(server["worker_call"]) == ("ValueError: kvstore dist_async: rank 2 is the server, it "
                                          "cannot init; call run_server(updater) there")


@pytest.mark.mpi
def test_async_init_keeps_worker_0s_value(async_run):
    w0, w1, server = async_run  # worker 1 inits 100 more
    for w in (w0, w1):
        numpy.testing.assert_array_equal(w["pulled_init"], server["initial"])


@pytest.mark.mpi
def test_async_sgd_applies_every_push(async_run):
    w0, w1, server = async_run
    expected = server["initial"] - LR * (w0["pushed"].sum(axis=0) + w1["pushed"].sum(axis=0))
    numpy.testing.assert_array_equal(server["final"], expected)  # integers: exact in any order
    numpy.testing.assert_array_equal(w0["final"], expected)
    numpy.testing.assert_array_equal(w1["final"], expected)
    for w in (w0, w1):  # a pushpull's weights reach every output, strided ones too
        assert bool(w["strided_copy"])


@pytest.mark.mpi
def test_async_optimizer_states_come_from_the_server(async_run):
    """Worker 0 reads the server's states (MXNet refuses to save a dist store's): 2 workers x
    8 pushes per key counted, also in the count each pull reports; saving and loading them
    back through the server works."""
    for w in async_run[:2]:
        assert int(w["states_num_update"]) == 16
        assert int(w["num_update"]) == 16
        assert str(w["save_load"]) == ""


@pytest.mark.mpi
def test_async_worker_goes_on_alone(async_run):
    w0, _, server = async_run  # worker 1 pauses 1 s before its first push
    own = server["initial"] - LR * numpy.cumsum(w0["pushed"], axis=0)
    numpy.testing.assert_array_equal(w0["pulls"], own)  # each pull: its own pushes, in order


@pytest.mark.mpi
def test_async_refusals(async_run):
    for w in async_run[:2]:
        assert str(w["before_optimizer"]).startswith(
            "ValueError: kvstore dist_async: push before set_optimizer")
        assert str(w["ignore_sparse"]) == IGNORE_SPARSE
        assert str(w["dtype"]).startswith("ValueError: kvstore key 0: Output buffer dtype is different")
        assert str(w["load_pickle"]).startswith("ValueError: kvstore dist_async: the server cannot "
                                                "load the optimizer states of worker")
        assert str(w["after_close"]) == "ValueError: kvstore dist_async: pull after close()"
        assert str(w["no_updater"]).startswith(
            "ConfigError: kvstore dist_async: set_optimizer, but the server was started without an updater")
        assert str(w["pull_before_init"]) == NOT_INITED.format(3)


@pytest.mark.mpi
def test_async_dead_worker_stops_the_others(mpiexec, tmp_path):
    w0, w1, server = launch(mpiexec, 3, "failures.py", tmp_path, "async_dead")
    assert w1 is None  # it exited without close()
    message = ("RunStopped: kvstore dist_async server: worker(s) 1 sent nothing for 2 s while "
               "worker(s) 0 waited for them in close(); a worker has stopped (crashed, or exited "
               "without close()) or is stuck")
    for s in (w0, server):
        assert str(s["error"]) == message
        assert float(s["seconds"]) < 10


@pytest.mark.mpi
def test_async_updater_error_reaches_every_worker(mpiexec, tmp_path):
    w0, w1, server = launch(mpiexec, 3, "failures.py", tmp_path, "async_updater")
    assert str(server["error"]) == "FloatingPointError: the third update blew up"
    for w in (w0, w1):
        assert str(w["error"]).startswith(
            "RunStopped: kvstore dist_async server: the update of key 0 pushed by worker ")
        assert str(w["error"]).endswith(" failed: FloatingPointError: the third update blew up")
        assert str(w["close"]) == ""
    for s in (w0, w1, server):  # at once: nobody waits for the 30 s timeout
        assert float(s["seconds"]) < 10


@pytest.mark.mpi
@pytest.mark.parametrize("who", ["worker", "server"])
def test_async_stop_signal_every_worker_stops_after_the_furthest_iteration(mpiexec, tmp_path, who):
    """Worker 1's request (after 7 pushes) or the server's own (after 20 requests) reaches each
    worker in the answer to a push; once both have asked, both are told the larger number of
    pushes either had made, and the server keeps the signal."""
    w0, w1, server = launch(mpiexec, 3, "failures.py", tmp_path, "async_stop", who)
    assert int(w0["learned"]) == 15 and int(server["stop_signal"]) == 15
    assert int(w1["learned"]) == (15 if who == "server" else 0)  # worker 1 asked first: it knew
    furthest = max(int(w0["pushes"]), int(w1["pushes"]))
    assert int(w0["after"]) == int(w1["after"]) == furthest


@pytest.mark.mpi
def test_async_stop_after_a_worker_closed_goes_on_to_the_end(mpiexec, tmp_path):
    """Worker 0 closes (its run is over) once it learns of worker 1's request: worker 1 is told
    to go on to its end (-1), and the server keeps no signal."""
    w0, w1, server = launch(mpiexec, 3, "failures.py", tmp_path, "async_stop", "closed")
    assert int(w0["learned"]) == 15 and int(w0["after"]) == -2  # it closed instead of asking
    assert int(w1["after"]) == -1 and int(w1["pushes"]) == 7
    assert int(server["stop_signal"]) == 0


@pytest.mark.mpi
def test_async_needs_a_server_and_a_worker(mpiexec):
    code, out = run([sys.executable, "-c",  # no mpiexec: a single MPI process
                     "from trainer_run.kvstore.worker import DistAsyncKVStore\n"
                     "try:\n    DistAsyncKVStore()\nexcept Exception as e:\n    print(type(e).__name__, e)"])
    assert code == 0, out
    assert out.strip() == ("ConfigError kvstore=dist_async needs at least 2 processes, 1 server and 1 "
                           "worker, got 1; launch it with e.g. mpiexec -n 3 (the last rank serves, the "
                           "others are workers)")
