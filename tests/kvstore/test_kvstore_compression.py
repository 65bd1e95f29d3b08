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

from tests.kvstore.test_dist import launch, mpiexec  # noqa: F401  (mpiexec is a fixture)
from trainer_run import kvstore, optimizers
from trainer_run.errors import ConfigError

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


def device_store(threshold=0.5):
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    return kv


# -- device ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("threshold", [0.5, 0.3], ids=["t0.5", "t0.3"])
@pytest.mark.parametrize("sources", [2, 3])
def test_device_sums_each_sources_dequantized_values_in_list_order(sources, threshold):
    kv = device_store(threshold)
    kv.init("w", numpy.zeros((5, 7), F32))
    senders = [Sender((5, 7), threshold) for _ in range(sources)]
    rng = numpy.random.default_rng(7)
    out = numpy.zeros((5, 7), F32)
    for _ in range(6):  # small values: most cross the threshold only with their residual
        values = [(rng.standard_normal((5, 7)) * 0.2).astype(F32) for _ in range(sources)]
        kv.push("w", values)
        kv.pull("w", out=out)
        numpy.testing.assert_array_equal(out, in_order([s.send(v) for s, v in zip(senders, values)]))


@pytest.mark.parametrize("values, sums", [
    ([0.25, 0.125], [0, 0.5, 0, 1.0]),
    ([0.25, 0.125, -0.375], [0, 0, -0.5, 0.5]),
], ids=["2sources", "3sources"])
def test_device_sources_keep_their_own_residuals(values, sums):
    """By hand, threshold 0.5: 0.25 a push sends 0, .5, 0, .5; 0.125 sends .5 at push 4; -0.375
    sends 0, -.5, -.5, -.5. One residual for the list's sum would send 0, .5, .5, .5 (2 sources)."""
    kv = device_store()
    kv.init(0, numpy.zeros(3, F32))
    out = numpy.zeros(3, F32)
    pulled = []
    for _ in sums:
        kv.push(0, [numpy.full(3, v, F32) for v in values])
        kv.pull(0, out=out)
        pulled.append(out.copy())
    numpy.testing.assert_array_equal(pulled, [numpy.full(3, s, F32) for s in sums])


def test_device_sums_in_list_order():
    """Threshold 0.1 (float32 13421773 * 2**-27): every value is sent at once. In list order,
    (t + t) + t rounds to 10066330 * 2**-25 and minus t rounds again, to 13421774 * 2**-26;
    in the reverse order the sum is exactly 2t, 13421773 * 2**-26."""
    t = F32(0.1)
    kv = device_store(t)
    kv.init(0, numpy.zeros(1, F32))
    x = numpy.zeros(1, F32)
    kv.pushpull(0, [numpy.full(1, v, F32) for v in (t, t, t, -t)], out=x)
    assert x[0] == F32(13421774 * 2.0 ** -26) != 2 * t


def test_device_compresses_a_single_value_too():
    kv = device_store()
    kv.init(0, numpy.zeros(4, F32))
    x = numpy.full(4, 0.3, F32)
    kv.pushpull(0, x)  # in place: 0.3 < 0.5 is kept for later
    numpy.testing.assert_array_equal(x, numpy.zeros(4))
    y = numpy.full(4, 0.3, F32)
    kv.pushpull(0, y)  # 0.3 + 0.3 >= 0.5
    numpy.testing.assert_array_equal(y, numpy.full(4, 0.5))


def test_device_update_on_the_store_sees_the_dequantized_sum():
    kv = device_store(0.3)
    w = numpy.full((4, 9), 2.0, F32)
    kv.init(1, w)
    kv.set_optimizer(optimizers.create("sgd", learning_rate=1.0))  # w -= 1.0 * grad
    senders = [Sender((4, 9), 0.3) for _ in range(2)]
    rng = numpy.random.default_rng(3)
    out = numpy.zeros((4, 9), F32)
    for _ in range(5):
        values = [(rng.standard_normal((4, 9)) * 0.25).astype(F32) for _ in range(2)]
        kv.push(1, values)
        w = w - in_order([s.send(v) for s, v in zip(senders, values)])
        kv.pull(1, out=out)
        numpy.testing.assert_array_equal(out, w)


# -- refusals and when it may be called -------------------------------------------------------------
def test_local_refuses_with_mxnets_message():
    with pytest.raises(ConfigError) as e:
        kvstore.create("local").set_gradient_compression({"type": "2bit"})
    assert str(e.value).startswith("Gradient compression is not supported for this type of kvstore")


@pytest.mark.parametrize("params, message", [
    ({"type": "1bit"}, "type='1bit' is not a gradient compression type of MXNet 1.9; choose one of 2bit"),
    ({"type": "2bit", "threshold": 0}, "threshold must be > 0"),
    ({"threshold": 0.5}, "type of gradient compression is required"),
])
def test_bad_params_are_refused(params, message):
    with pytest.raises(ConfigError, match=message):
        kvstore.create("device").set_gradient_compression(params)


def test_a_float16_key_is_refused_before_anything_moves():
    kv = device_store()
    kv.init([0, 1], [numpy.zeros(4, F32), numpy.zeros(4, numpy.float16)])
    with pytest.raises(ConfigError) as e:
        kv.push([0, 1], [numpy.ones(4, F32), numpy.ones(4, numpy.float16)])
    assert str(e.value) == (
        'kvstore key 1 holds float16 values: gradient compression works on float32 keys only (MXNet: '
        '"Gradient compression is only supported for float32 type of parameters"); train in float32 '
        '(precision=fp32) or turn compression off')
    out = numpy.full(4, 7, F32)
    kv.pull(0, out=out)
    numpy.testing.assert_array_equal(out, numpy.zeros(4))  # key 0 was not pushed either


def test_a_float32_key_takes_float32_values_only():
    kv = device_store()
    kv.init(0, numpy.zeros(4, F32))
    with pytest.raises(ConfigError, match="kvstore key 0: a float64 value pushed to a compressed "
                                          "float32 key; with gradient compression every pushed value "
                                          "must be float32"):
        kv.push(0, [numpy.ones(4, F32), numpy.ones(4)])


def test_a_float64_key_is_summed_exactly():
    kv = device_store()
    kv.init("metrics", numpy.zeros(2))
    v = numpy.array([0.125, 0.25])
    kv.pushpull("metrics", [v, v], out=v)  # compressed, this would be 0
    numpy.testing.assert_array_equal(v, [0.25, 0.5])


def test_set_it_before_the_first_push():
    kv = kvstore.create("device")
    kv.init(0, numpy.zeros(2, F32))
    kv.set_gradient_compression({"type": "2bit"})  # after init: allowed
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.25})  # replaces the first
    x = numpy.full(2, 0.3, F32)
    kv.pushpull(0, x)
    numpy.testing.assert_array_equal(x, [0.25, 0.25])
    with pytest.raises(ValueError) as e:
        kv.set_gradient_compression({"type": "2bit"})
    assert str(e.value) == (
        "kvstore device: set_gradient_compression after a push; call it before the first push (after "
        "init is fine), as Gluon's Trainer does, so that every push of a key is compressed with its residual")


def test_set_after_an_uncompressed_push_is_refused():
    kv = kvstore.create("device")
    kv.init(0, numpy.zeros(2, F32))
    kv.push(0, [numpy.ones(2, F32), numpy.ones(2, F32)])
    with pytest.raises(ValueError, match="set_gradient_compression after a push"):
        kv.set_gradient_compression({"type": "2bit"})


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
                                          "set_gradient_compression; call run_server(updater) there")
    for w in (w0, w1):
        assert str(w["after_push"]).startswith("ValueError: kvstore dist_async: set_gradient_compression "
                                               "after a push")
    assert str(w0["mismatch"]) == ""
    assert str(w1["mismatch"]) == (
        "ConfigError: kvstore dist_async: worker 1 sets gradient compression threshold 0.25, worker 0 set "
        "0.5; every worker must call set_gradient_compression with the same params")
