"""Compressed pushes in the in-process stores (kvstore/push_compression.py, MXNet's
set_gradient_compression): each source's dequantized values summed in list order with its own
residual, a single value compressed too, updates on the store seeing the dequantized sum; the local
store's refusal, bad parameters, float16 keys refused, float32 and float64 keys, and when it may be
set. Every expected sum is recomputed by hand in float32 from MXNet 1.9's rule."""

import numpy
import pytest

from tests.kvstore.test_kvstore_compression import F32, Sender, in_order
from trainer_run import kvstore, optimizers
from trainer_run.errors import ConfigError


def device_store(threshold=0.5):
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    return kv


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
