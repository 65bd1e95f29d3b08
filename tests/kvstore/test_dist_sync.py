"""dist_sync and dist_device_sync across processes (kvstore/dist_sync.py), each mpi test on ranks
launched by mpiexec: the ranks, rank 0's initial value, the sums over the list then the ranks,
several keys and float16, the same bytes on every rank, the barrier, the refusals, no timeout, and a
dead rank stopping the others."""

import numpy
import pytest
from mpi_jobs import launch

IGNORE_SPARSE = "ValueError: dist kvstore pull doesn't support ignore_sparse=False"


NOT_INITED = "ValueError: kvstore key {0} has not been inited: call init({0}, value) first"


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
