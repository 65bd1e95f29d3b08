"""dist_async (kvstore/worker.py, with the server loop of kvstore/server.py), on ranks launched by
mpiexec: the last rank serves, applies every push with its optimizer and holds the optimizer states;
worker 0's initial value, a worker going on alone, the refusals, a dead worker or an updater's error
reaching every worker, stop signals, and a job needing a server and a worker."""

import sys

import numpy
import pytest
from mpi_jobs import launch, run

IGNORE_SPARSE = "ValueError: dist kvstore pull doesn't support ignore_sparse=False"


NOT_INITED = "ValueError: kvstore key {0} has not been inited: call init({0}, value) first"


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
                                          "cannot init; call run_server(applier) there")


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
            "ConfigError: kvstore dist_async: set_optimizer, but the server was started without an applier")
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
