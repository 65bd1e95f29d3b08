"""2-bit gradient compression in the kvstores (``set_gradient_compression``), end to end.

Every expected sum is recomputed here by hand, element by element in float32, from MXNet 1.9's
rule (``quantize_2bit`` in ``src/kvstore/gradient_compression-inl.h``): ``v = residual + grad``;
``v >= t`` sends ``+t`` and keeps ``v - t``, ``v <= -t`` sends ``-t`` and keeps ``v + t``, else
sends 0 and keeps ``v``. Where the values are summed and with which residuals is MXNet's
``CommDevice::ReduceCompressed`` (``device``: one residual per pushed position, the dequantized
values summed in list order) and ``KVStoreDist::PushCompressed`` (dist types: one residual per
worker and key, on the worker's local sum). The ``mpi`` tests run ``tests/mpi/compression_checks.py``.
"""

import numpy
import pytest
from mpi_jobs import launch

F32 = numpy.float32


def quantize_by_hand(grad, residual, threshold):
    """The values sent (``+t``, ``-t`` or 0) and the new residual, one element at a time."""
    t = F32(threshold)
    sent, kept = [], []
    for g, r in zip(numpy.asarray(grad, F32).ravel(), numpy.asarray(residual, F32).ravel()):
        v = r + g  # float32 scalars: a float32 addition
        if v >= t:
            sent.append(t)
            kept.append(v - t)
        elif v <= -t:
            sent.append(-t)
            kept.append(v + t)
        else:
            sent.append(F32(0))
            kept.append(v)
    shape = numpy.shape(grad)
    return numpy.array(sent, F32).reshape(shape), numpy.array(kept, F32).reshape(shape)


class Sender:
    """One source's (device's or worker's) residual for one key, kept by hand."""

    def __init__(self, shape, threshold):
        self.residual = numpy.zeros(shape, F32)
        self.threshold = threshold

    def send(self, grad):
        sent, self.residual = quantize_by_hand(grad, self.residual, self.threshold)
        return sent


def in_order(values):
    """``v0 + v1 + ...`` in float32, one addition at a time."""
    total = numpy.array(values[0], F32)
    for v in values[1:]:
        total = total + numpy.asarray(v, F32)
    return total


# -- device ---------------------------------------------------------------------------------------


# -- refusals and when it may be called -------------------------------------------------------------


# -- dist_sync, dist_device_sync -------------------------------------------------------------------
THRESHOLD, STEPS = 0.5, 5  # as in tests/mpi/compression_checks.py
SIZES = (37, 15)  # keys 0 and 1, flat


@pytest.fixture(scope="module", params=[(2, 0.5), (3, 0.5), (4, 0.1)], ids=["2ranks", "3ranks", "4ranks"])
def sync_run(request, mpiexec, tmp_path_factory):  # noqa: F811
    """With 4 ranks and a threshold of 0.1 the order of the sum over ranks shows in the bytes
    (see test_device_sums_in_list_order); with 2 or 3 addends of +-t or 0 it cannot."""
    n, threshold = request.param
    seen = launch(mpiexec, n, "compression_checks.py", tmp_path_factory.mktemp(f"gc{n}"), "sync",
                  str(threshold))
    return n, threshold, seen


def by_hand(pushed_per_rank, threshold):
    """Per step, the sum every rank should pull: each rank's local list summed, quantized with
    its own residual per key, the ranks' values added in rank order (rank 0 + rank 1 + ...)."""
    senders = [[Sender(size, threshold) for size in SIZES] for _ in pushed_per_rank]
    steps = []
    for step in range(STEPS):
        keys = []
        for k, size in enumerate(SIZES):
            start = 2 * sum(SIZES[:k])
            sent = []
            for rank, pushed in enumerate(pushed_per_rank):
                a, b = pushed[step, start:start + size], pushed[step, start + size:start + 2 * size]
                sent.append(senders[rank][k].send(a + b))  # the local list, summed uncompressed
            keys.append(in_order(sent))
        steps.append(numpy.concatenate(keys))
    return numpy.stack(steps)


@pytest.mark.mpi
@pytest.mark.parametrize("t", ["dist_sync", "dist_device_sync"])
def test_sync_every_rank_pulls_the_compressed_sum_in_rank_order(sync_run, t):
    n, threshold, seen = sync_run
    expected = by_hand([s[f"{t}.pushed"] for s in seen], threshold)
    assert numpy.count_nonzero(expected) > expected.size // 4  # something was sent
    for s in seen:
        numpy.testing.assert_array_equal(s[f"{t}.pulled"], expected)
    assert len({s[f"{t}.pulled"].tobytes() for s in seen}) == 1


@pytest.mark.mpi
@pytest.mark.parametrize("t", ["dist_sync", "dist_device_sync"])
def test_sync_in_place_pushpull_and_other_dtypes(sync_run, t):
    n, threshold, seen = sync_run
    in_place = in_order([quantize_by_hand(numpy.full(20, 0.25 * (r + 1), F32), numpy.zeros(20), threshold)[0]
                         for r in range(n)])
    for s in seen:
        numpy.testing.assert_array_equal(s[f"{t}.in_place"], in_place)
        numpy.testing.assert_array_equal(s[f"{t}.float64"], numpy.full(4, 0.125 * n * (n + 1) / 2))
        assert str(s[f"{t}.float16"]).startswith("ConfigError: kvstore key 4 holds float16 values: gradient "
                                                 "compression works on float32 keys only")
        assert str(s[f"{t}.value_dtype"]).startswith("ConfigError: kvstore key 2: a float64 value pushed")
        assert str(s[f"{t}.after_push"]).startswith(f"ValueError: kvstore {t}: set_gradient_compression "
                                                    f"after a push")


@pytest.mark.mpi
def test_sync_update_on_the_store_sees_the_compressed_sum(sync_run):
    _, threshold, seen = sync_run  # key 0 of the same local lists, SGD with learning rate 1 from 2.0
    sums = by_hand([s["dist_sync.pushed"] for s in seen], threshold)[:, :SIZES[0]]
    w, expected = numpy.full(SIZES[0], 2.0, F32), []
    for total in sums:
        w = w - total
        expected.append(w)
    for s in seen:
        numpy.testing.assert_array_equal(s["sgd.weights"], expected)


@pytest.mark.mpi
def test_sync_ranks_must_set_the_same_params(sync_run):
    *_, seen = sync_run
    for s in seen:  # rank 0 sets 0.5, the others 0.25: the same error everywhere
        assert str(s["mismatch"]) == (
            "ConfigError: kvstore dist_sync: the ranks set different gradient compression thresholds, "
            "from 0.25 to 0.5; every rank must call set_gradient_compression with the same params")
    assert str(seen[0]["refused"]) == (  # the others' threshold -1 is refused where it is set
        "ConfigError: kvstore dist_sync: set_gradient_compression was refused on another rank; every "
        "rank must call it with the same params before its first push")
    for s in seen[1:]:
        assert str(s["refused"]).startswith("ConfigError: threshold must be > 0")


# -- dist_async -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def async_run(mpiexec, tmp_path_factory):  # noqa: F811
    return launch(mpiexec, 3, "compression_checks.py", tmp_path_factory.mktemp("gca"), "async")


@pytest.mark.mpi
def test_async_server_applies_each_workers_dequantized_pushes(async_run):
    *workers, server = async_run
    expected = server["initial"].copy()  # SGD with learning rate 1: w -= every push's values
    for w in workers:
        senders = [Sender(size, THRESHOLD) for size in SIZES]
        for pushed in w["pushed"]:
            start = 0
            for k, size in enumerate(SIZES):
                a, b = pushed[start:start + size], pushed[start + size:start + 2 * size]
                at = sum(SIZES[:k])
                expected[at:at + size] -= senders[k].send(a + b)
                start += 2 * size
    assert not numpy.array_equal(expected, server["initial"])
    # multiples of 1/8 near 0: exact in float32, whatever order the pushes arrived in
    numpy.testing.assert_array_equal(server["final"], expected)
    for w in workers:
        numpy.testing.assert_array_equal(w["final"], expected)


@pytest.mark.mpi
def test_async_refusals(async_run):
    w0, w1, server = async_run
    assert str(server["server_call"]) == ("ValueError: kvstore dist_async: rank 2 is the server, it cannot "
                                          "set_gradient_compression; call run_server(applier) there")
    for w in (w0, w1):
        assert str(w["after_push"]).startswith("ValueError: kvstore dist_async: set_gradient_compression "
                                               "after a push")
    assert str(w0["mismatch"]) == ""
    assert str(w1["mismatch"]) == (
        "ConfigError: kvstore dist_async: worker 1 sets gradient compression threshold 0.25, worker 0 set "
        "0.5; every worker must call set_gradient_compression with the same params")
