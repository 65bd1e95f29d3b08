"""Updating on the kvstore (MXNet's set_optimizer) and its optimizer states, checked by hand."""

import pickle

import numpy
import pytest

from trainer_run import kvstore, optimizers
from trainer_run.kvstore import wire
from trainer_run.optimizers import SGD, get_updater

LR, MOMENTUM, WD, RESCALE = 0.1, 0.9, 0.01, 0.5


@pytest.fixture(params=["local", "device"])
def kv(request):
    return kvstore.create(request.param)


def sgd():
    return SGD(learning_rate=LR, momentum=MOMENTUM, wd=WD, rescale_grad=RESCALE)


def gradients(steps, replicas=3, shape=(2, 3), seed=0):
    rng = numpy.random.default_rng(seed)
    return [[rng.standard_normal(shape).astype(numpy.float32) for _ in range(replicas)]
            for _ in range(steps)]


def pulled(kv, key, like):
    out = numpy.zeros_like(like)
    kv.pull(key, out=out)
    return out


def test_push_applies_sgd_to_the_summed_gradients(kv):
    w0 = numpy.linspace(1, 2, 6, dtype=numpy.float32).reshape(2, 3)
    kv.init(3, w0)
    kv.set_optimizer(sgd())
    w, mom = w0.astype(numpy.float64), numpy.zeros(w0.shape)  # float64 reference, by hand
    direct, updater = w0.copy(), get_updater(sgd())  # MXNet's updater applied to the sum directly
    for k, grads in enumerate(gradients(5)):
        if k % 2:
            kv.pushpull(3, grads, out=[out := numpy.zeros_like(w0)])
        else:
            kv.push(3, grads)
            out = pulled(kv, 3, w0)
        total = grads[0].copy()
        for g in grads[1:]:  # the store's order: one addition at a time
            total += g
        updater(3, total, direct)
        mom = MOMENTUM * mom - LR * WD * w - LR * RESCALE * sum(g.astype(numpy.float64) for g in grads)
        w = w + mom
        numpy.testing.assert_allclose(out, w, rtol=1e-6)
        numpy.testing.assert_array_equal(out, direct)


@pytest.mark.parametrize("key", [7, "fc_weight"])
def test_the_key_is_the_optimizer_index(kv, key):
    kv.init(key, numpy.ones(2, dtype=numpy.float32))
    optimizer = SGD(learning_rate=1.0)
    optimizer.set_lr_mult({key: 0.5})
    kv.set_optimizer(optimizer)
    kv.push(key, [numpy.ones(2, dtype=numpy.float32)] * 2)
    numpy.testing.assert_array_equal(pulled(kv, key, numpy.zeros(2, numpy.float32)), [0, 0])
    assert optimizer._index_update_count == {key: 1}


def test_weight_and_gradient_buffers_stay_apart(kv):
    kv.init(0, numpy.zeros(2, dtype=numpy.float32))
    kv.push(0, numpy.array([4, 8], dtype=numpy.float32))  # no optimizer yet: replaces
    kv.set_optimizer(SGD(learning_rate=0.25))
    grad = numpy.array([4, 4], dtype=numpy.float32)
    kv.push(0, [grad, grad])
    numpy.testing.assert_array_equal(pulled(kv, 0, grad), [2, 6])  # [4, 8] - 0.25 * 8
    numpy.testing.assert_array_equal(grad, [4, 4])


@pytest.mark.parametrize("dump_optimizer", [False, True])
def test_states_round_trip_mid_sequence(kv, tmp_path, dump_optimizer):
    w0 = numpy.linspace(-1, 1, 6, dtype=numpy.float32).reshape(2, 3)
    steps = gradients(6)
    kv.init(0, w0)
    kv.set_optimizer(sgd())
    for grads in steps[:3]:
        kv.push(0, grads)
    kv.save_optimizer_states(tmp_path / "states.npz", dump_optimizer=dump_optimizer)
    middle = pulled(kv, 0, w0)
    for grads in steps[3:]:
        kv.push(0, grads)

    resumed = kvstore.create(kv.type)
    resumed.init(0, middle)
    resumed.set_optimizer(sgd())
    resumed.load_optimizer_states(tmp_path / "states.npz")
    for grads in steps[3:]:
        resumed.push(0, grads)
    numpy.testing.assert_array_equal(pulled(resumed, 0, w0), pulled(kv, 0, w0))
    if dump_optimizer:
        assert resumed._applier.optimizer._index_update_count == {0: 6}


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):  # unpickling would create the marker file
        return open, (str(self.marker), "w")


@pytest.mark.parametrize("form", ["pickle", "npz with an object array"])
def test_pickled_states_are_refused_unexecuted(kv, tmp_path, form):
    marker, path = tmp_path / "executed", tmp_path / "states"
    if form == "pickle":
        path.write_bytes(pickle.dumps({0: _Payload(marker)}))
        expected = "not an optimizer-states file"
    else:
        numpy.savez(path.with_suffix(".npz"), states=numpy.array([_Payload(marker)], dtype=object))
        path = path.with_suffix(".npz")
        expected = "allow_pickle=False"
    kv.init(0, numpy.zeros(2, dtype=numpy.float32))
    kv.set_optimizer(sgd())
    with pytest.raises(ValueError, match=expected):
        kv.load_optimizer_states(path)
    assert not marker.exists()
    assert kv._applier.states == {}


def test_states_need_an_optimizer(kv, tmp_path):
    with pytest.raises(AssertionError, match="Cannot save states for distributed training"):
        kv.save_optimizer_states(tmp_path / "states.npz")
    with pytest.raises(AssertionError, match="Cannot load states for distributed training"):
        kv.load_optimizer_states(tmp_path / "states.npz")


def test_mismatched_states_are_refused(kv, tmp_path):
    kv.init(0, numpy.zeros(3, dtype=numpy.float32))
    kv.set_optimizer(sgd())
    kv.push(0, numpy.ones(3, dtype=numpy.float32))
    kv.save_optimizer_states(tmp_path / "states.npz")
    other = kvstore.create(kv.type)
    other.init(0, numpy.zeros(2, dtype=numpy.float32))
    other.set_optimizer(sgd())
    other.push(0, numpy.ones(2, dtype=numpy.float32))
    with pytest.raises(ValueError, match=r"key 0 has shape \(3,\), expected \(2,\)"):
        other.load_optimizer_states(tmp_path / "states.npz")


@pytest.mark.gpu
def test_device_store_updates_on_the_device(cupy):
    kv = kvstore.create("device")
    w0 = numpy.linspace(1, 2, 6, dtype=numpy.float32).reshape(2, 3)
    kv.init(0, w0)  # on the host: it moves to the device before its first update (MXNet)
    kv.set_optimizer(sgd())
    direct, updater = w0.copy(), get_updater(sgd())
    for grads in gradients(3):
        kv.push(0, [cupy.asarray(g) for g in grads])
        total = grads[0].copy()
        for g in grads[1:]:
            total += g
        updater(0, total, direct)
    assert isinstance(kv._store[0], cupy.ndarray)
    numpy.testing.assert_allclose(pulled(kv, 0, w0), direct, rtol=1e-6)


def test_a_push_carrying_a_loss_scale_is_divided_out_by_the_optimizer_step():
    """``push(..., scale=s)`` of ``s * g`` steps as the optimizer with ``rescale_grad / s`` on
    ``s * g`` (how every local update undoes a loss scale), to the bit; the header of a
    dist_async push carries the scale's float64 bits."""
    rng = numpy.random.default_rng(0)
    w0 = rng.standard_normal(10).astype(numpy.float32)
    grads = [(3.0 * rng.standard_normal(10)).astype(numpy.float32) for _ in range(3)]
    kv = kvstore.create("local")
    kv.init(0, w0)
    kv.set_optimizer(optimizers.create("adam", learning_rate=0.1, rescale_grad=0.5))
    reference = optimizers.create("adam", learning_rate=0.1, rescale_grad=0.5 / 1000.0)
    state, w = reference.create_state(0, w0), w0.copy()
    for g in grads:
        kv.push(0, g * numpy.float32(1000.0), scale=1000.0)
        reference.update(0, w, g * numpy.float32(1000.0), state)
    out = numpy.empty_like(w0)
    kv.pull(0, out=out)
    assert numpy.array_equal(out, w)
    with pytest.raises(ValueError, match="only a store that updates with an optimizer"):
        plain = kvstore.create("local")
        plain.init(0, w0)
        plain.push(0, w0, scale=2.0)
    h = numpy.zeros(wire.HDR, dtype=numpy.int64)
    wire.pack_request(h, wire.PUSH, 3, w0, scale=1000.0)
    assert wire.scale_of(h) == 1000.0
    wire.pack_request(h, wire.PUSH, 3, w0)
    assert h[6] == 0 and wire.scale_of(h) == 1.0
