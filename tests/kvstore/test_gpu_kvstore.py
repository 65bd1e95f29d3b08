"""The in-process kvstores (``local``: sums in host memory; ``device``: on the device of the
first value pushed) with CuPy values: sums, in-place pushpull, broadcast, updates on the
store (with a loss scale), optimizer states saved and loaded mid-way, and 2-bit gradient
compression give what the same calls give with NumPy values."""

from __future__ import annotations

import numpy
import pytest
from gpu_helpers import assert_close, backend, host

from trainer_run import kvstore, optimizers

SHAPE = (3, 5)
SEED = 1
# Sums are element-wise additions in list order: IEEE rounds each alike on both, so equal.
EXACT = (0, 0)
# An optimizer step is a few operations per element, which CUDA may fuse into multiply-adds
# (one rounding instead of two): within a few float32 ulps per step, over 5 steps.
STEPPED = (1e-5, 1e-6)


def _values(rng, n, dtype=numpy.float32):
    return [(rng.standard_normal(SHAPE) * 0.4).astype(dtype) for _ in range(n)]


def _sum(kv, b, rng, dtype=numpy.float32):
    kv.init("w", numpy.zeros(SHAPE, dtype))
    outs = [b.xp.zeros(SHAPE, dtype), numpy.zeros(SHAPE, dtype)]
    kv.push("w", [b.asarray(v) for v in _values(rng, 3, dtype)])
    kv.pull("w", out=outs)
    return outs


def _pushpull_in_place(kv, b, rng):
    kv.init(0, numpy.zeros(SHAPE, numpy.float32))
    values = [b.asarray(v) for v in _values(rng, 3)]
    kv.pushpull(0, values, out=values)
    return values


def _broadcast(kv, b, rng):
    outs = [b.xp.zeros(SHAPE, numpy.float32), numpy.zeros(SHAPE, numpy.float32)]
    kv.broadcast(7, b.asarray(_values(rng, 1)[0]), out=outs)
    return outs


def _stream(rng, steps=5):
    """A starting weight and ``steps`` pushes of 2 gradients."""
    return _values(rng, 1)[0], [_values(rng, 2) for _ in range(steps)]


def _step(kv, b, grads, out, scale=1.0):
    kv.push(1, [b.asarray(g * numpy.float32(scale)) for g in grads], scale=scale)
    kv.pull(1, out=out)
    return out.copy()


def _updated(kv, b, rng, name, scale=1.0, kwargs=None):
    w0, pushes = _stream(rng)
    kv.init(1, b.asarray(w0))
    kv.set_optimizer(optimizers.create(name, **(kwargs or {})))
    out = b.xp.zeros(SHAPE, numpy.float32)
    return [_step(kv, b, grads, out, scale) for grads in pushes]


SGD = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}


def _states_round_trip(kv, b, rng, folder):
    """3 updates, the optimizer states saved; a new store of the pulled weights loads them and
    takes the 2 more: the same weights as 5 updates of one store, bit for bit."""
    w0, pushes = _stream(rng)
    straight = _updated(kvstore.create(kv.type), b, numpy.random.default_rng(SEED), "sgd", kwargs=SGD)
    kv.init(1, b.asarray(w0))
    kv.set_optimizer(optimizers.create("sgd", **SGD))
    out = b.xp.zeros(SHAPE, numpy.float32)
    seen = [_step(kv, b, grads, out) for grads in pushes[:3]]
    kv.save_optimizer_states(folder / "states.npz")
    other = kvstore.create(kv.type)
    other.init(1, seen[-1])
    other.set_optimizer(optimizers.create("sgd", **SGD))
    other.load_optimizer_states(folder / "states.npz")
    seen += [_step(other, b, grads, out) for grads in pushes[3:]]
    for a, c in zip(seen, straight):
        numpy.testing.assert_array_equal(host(a), host(c))
    return seen


SCENARIOS = {
    "sum": (lambda kv, b, rng, _: _sum(kv, b, rng), EXACT),
    "sum_float16": (lambda kv, b, rng, _: _sum(kv, b, rng, numpy.float16), EXACT),
    "pushpull_in_place": (lambda kv, b, rng, _: _pushpull_in_place(kv, b, rng), EXACT),
    "broadcast": (lambda kv, b, rng, _: _broadcast(kv, b, rng), EXACT),
    "update_sgd": (lambda kv, b, rng, _: _updated(kv, b, rng, "sgd", kwargs={**SGD, "rescale_grad": 0.5}),
                   STEPPED),
    "update_adam": (lambda kv, b, rng, _: _updated(kv, b, rng, "adam", kwargs={
        "learning_rate": 0.05, "clip_gradient": 0.3}), STEPPED),
    "update_with_loss_scale": (lambda kv, b, rng, _: _updated(kv, b, rng, "adam", scale=1024.0),
                               STEPPED),
    "states_round_trip": (lambda kv, b, rng, tmp: _states_round_trip(kv, b, rng, tmp), STEPPED),
}


def exchange(device: str, kind: str, scenario: str, tmp_path) -> list:
    b = backend(device)
    folder = tmp_path / device
    folder.mkdir(exist_ok=True)
    return [host(a) for a in SCENARIOS[scenario][0](kvstore.create(kind), b,
                                                    numpy.random.default_rng(SEED), folder)]


@pytest.mark.gpu
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", kvstore.LOCAL_TYPES)
def test_a_store_given_cupy_values_gives_what_numpy_values_give(kind, scenario, tmp_path):
    got = exchange("cupy", kind, scenario, tmp_path)
    assert_close(got, exchange("numpy", kind, scenario, tmp_path), *SCENARIOS[scenario][1],
                 f"{kind} {scenario}")


def compressed(device: str, threshold: float, sources: int) -> list:
    b = backend(device)
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    kv.init("w", numpy.zeros(SHAPE, numpy.float32))
    rng, out, seen = numpy.random.default_rng(7), b.xp.zeros(SHAPE, numpy.float32), []
    for _ in range(6):  # small values: most cross the threshold only with their residual
        kv.push("w", [b.asarray(v) for v in _values(rng, sources)])
        kv.pull("w", out=out)
        seen.append(host(out))
    return seen


@pytest.mark.gpu
@pytest.mark.parametrize("threshold, sources", [(0.5, 2), (0.3, 3)])
def test_two_bit_compression_of_cupy_values_is_numpys(threshold, sources):
    """Quantizing, keeping residuals and summing the dequantized values round alike: equal."""
    assert_close(compressed("cupy", threshold, sources), compressed("numpy", threshold, sources),
                 *EXACT, "2bit")
