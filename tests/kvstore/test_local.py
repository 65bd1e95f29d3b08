"""The in-process kvstores: MXNet 1.9's init / push / pull semantics, checked by hand."""

import numpy
import pytest

from trainer_run import kvstore
from trainer_run.errors import ConfigError


@pytest.fixture(params=list(kvstore.LOCAL_TYPES))
def kv(request):
    return kvstore.create(request.param)


def f32(*values):
    return numpy.array(values, dtype=numpy.float32)


def pulled(kv, key, like):
    out = numpy.full_like(like, -1)
    kv.pull(key, out=out)
    return out


def test_create(kv):
    assert kv.type in kvstore.LOCAL_TYPES
    assert (kv.rank, kv.num_workers) == (0, 1)
    assert kvstore.create("Device").type == "device"
    assert kvstore.create().type == "local"
    kv.barrier()


def test_unknown_type():
    expected = ("kvstore type 'foo' is unknown; choose one of "
                "local, device, dist_sync, dist_device_sync, dist_async")
    with pytest.raises(ConfigError, match=expected):
        kvstore.create("foo")


def test_init_stores_a_copy(kv):
    src = f32(1, 2, 3)
    kv.init(3, src)
    src[:] = 0
    out = pulled(kv, 3, src)
    numpy.testing.assert_array_equal(out, [1, 2, 3])
    out[:] = 9  # nor is the pulled array the stored one
    numpy.testing.assert_array_equal(pulled(kv, 3, src), [1, 2, 3])


def test_push_sums_a_list(kv):
    a = numpy.array([[1, 2], [3, 4]], dtype=numpy.float32)
    kv.init(0, numpy.zeros_like(a))
    kv.push(0, [a, 10 * a, 100 * a])
    outs = [numpy.zeros_like(a), numpy.zeros_like(a)]
    kv.pull(0, out=outs)
    for out in outs:
        numpy.testing.assert_array_equal(out, [[111, 222], [333, 444]])
    numpy.testing.assert_array_equal(a, [[1, 2], [3, 4]])  # the pushed values are untouched


def test_push_replaces(kv):
    kv.init(0, f32(5, 5))
    kv.push(0, f32(1, 2))
    numpy.testing.assert_array_equal(pulled(kv, 0, f32(0, 0)), [1, 2])  # not 5 + ...
    kv.push(0, [f32(1, 1), f32(2, 2)])
    numpy.testing.assert_array_equal(pulled(kv, 0, f32(0, 0)), [3, 3])  # not 1 + 2 + 3
    single = f32(7, 8)
    kv.push(0, single)
    single[:] = 0  # a single pushed value is stored as a copy
    numpy.testing.assert_array_equal(pulled(kv, 0, f32(0, 0)), [7, 8])


def test_lists_of_keys(kv):
    kv.init([1, 2], [f32(0), f32(0, 0)])
    kv.push([1, 2], [f32(5), f32(1, 2)])  # one value per key
    one, two = f32(0), f32(0, 0)
    kv.pull([1, 2], out=[one, two])
    numpy.testing.assert_array_equal(one, [5])
    numpy.testing.assert_array_equal(two, [1, 2])
    kv.push([1, 2], [[f32(1), f32(2)], [f32(1, 1), f32(2, 2)]])  # a list of values per key
    outs = [[f32(0), f32(0)], [f32(0, 0)]]
    kv.pull([1, 2], out=outs)
    numpy.testing.assert_array_equal(numpy.concatenate(outs[0]), [3, 3])
    numpy.testing.assert_array_equal(outs[1][0], [3, 3])
    kv.push([1, 1], [f32(1), f32(2)])  # a key given twice: all its values are summed
    numpy.testing.assert_array_equal(pulled(kv, 1, f32(0)), [3])


def test_pushpull(kv):
    kv.init(0, f32(0, 0))
    values = [f32(1, 2), f32(3, 4)]
    out = f32(0, 0)
    kv.pushpull(0, values, out=out)
    numpy.testing.assert_array_equal(out, [4, 6])
    numpy.testing.assert_array_equal(values[0], [1, 2])
    kv.pushpull(0, values)  # no out: the sum is written back into the values
    for v in values:
        numpy.testing.assert_array_equal(v, [4, 6])


def test_broadcast(kv):
    outs = [f32(0, 0), f32(0, 0)]
    kv.broadcast("w", f32(1, 2), out=outs)
    for out in outs:
        numpy.testing.assert_array_equal(out, [1, 2])
    numpy.testing.assert_array_equal(pulled(kv, "w", f32(0, 0)), [1, 2])
    with pytest.raises(ValueError, match="duplicate init of kvstore key 'w'"):
        kv.broadcast("w", f32(3, 4), out=outs)


@pytest.mark.parametrize("key", [7, "weight"])
def test_int_and_str_keys(kv, key):
    kv.init(key, f32(1))
    kv.push(key, [f32(2), f32(3)])
    numpy.testing.assert_array_equal(pulled(kv, key, f32(0)), [5])
    other = "bias" if isinstance(key, int) else 8
    with pytest.raises(TypeError, match="mixed key types are not allowed"):
        kv.init(other, f32(1))


def test_errors(kv):
    kv.init(3, f32(1, 2))
    with pytest.raises(ValueError, match="duplicate init of kvstore key 3"):
        kv.init(3, f32(1, 2))
    with pytest.raises(ValueError, match=r"kvstore key 4 has not been inited: call init\(4, value\)"):
        kv.push(4, f32(1, 2))
    with pytest.raises(ValueError, match="kvstore key 4 has not been inited"):
        kv.pull(4, out=f32(1, 2))
    with pytest.raises(ValueError, match=r"key 3: value shape \(3,\) does not match the stored shape \(2,\)"):
        kv.push(3, [f32(1, 2), f32(1, 2, 3)])
    with pytest.raises(ValueError, match=r"key 3: out shape \(1,\) does not match the stored shape \(2,\)"):
        kv.pull(3, out=f32(0))
    with pytest.raises(ValueError, match="2 kvstore keys need a list of 2 values"):
        kv.push([3, 3], [f32(1, 2)])
    numpy.testing.assert_array_equal(pulled(kv, 3, f32(0, 0)), [1, 2])  # failed calls changed nothing


def test_float16_summed_in_float16(kv):
    kv.init(0, numpy.zeros(2, dtype=numpy.float16))
    values = [numpy.array([2048, 1], dtype=numpy.float16), numpy.ones(2, dtype=numpy.float16),
              numpy.ones(2, dtype=numpy.float16)]
    kv.push(0, values)
    out = numpy.zeros(2, dtype=numpy.float16)
    kv.pull(0, out=out)
    # in float16, 2048 + 1 rounds back to 2048 (its spacing there is 2); float32 would give 2050
    numpy.testing.assert_array_equal(out, [2048, 3])
    assert kv._store[0].dtype == numpy.float16


def test_sum_in_list_order(kv):
    kv.init(0, f32(0))
    kv.push(0, [f32(1e8), f32(1), f32(-1e8)])
    assert pulled(kv, 0, f32(0))[0] == 0.0  # (1e8 + 1) - 1e8: the 1 is lost to rounding
    kv.push(0, [f32(1e8), f32(-1e8), f32(1)])
    assert pulled(kv, 0, f32(0))[0] == 1.0  # (1e8 - 1e8) + 1; 1e8 + (-1e8 + 1) would give 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["local", "device"])
def test_host_and_device_values(name, cupy):
    kv = kvstore.create(name)
    kv.init(0, f32(0, 0))
    kv.push(0, [cupy.asarray(f32(1, 2)), f32(10, 20), cupy.asarray(f32(100, 200))])
    outs = [f32(0, 0), cupy.zeros(2, dtype=cupy.float32)]
    kv.pull(0, out=outs)
    numpy.testing.assert_array_equal(outs[0], [111, 222])
    numpy.testing.assert_array_equal(cupy.asnumpy(outs[1]), [111, 222])
    on_device = isinstance(kv._store[0], cupy.ndarray)
    assert on_device == (name == "device")


# -- the Trainer's kvstore decision (trainer_rules: MXNet 1.9's rule table) ---------------------
