"""``updater.clip_global_norm``: MXNet's ``gluon.utils.clip_global_norm`` over every gradient
of the model, after the loss scale is divided out and the gradients are summed, before
``rescale_grad`` and the optimizer's element-wise ``clip_gradient``: against a hand
computation, and the same under accumulation, parallel replicas and two workers; a non-finite
norm follows ``updater.nan_policy`` (or the dynamic loss scaler); bad values and dist_async
are refused in one line (from the command line: tests/command/test_clip_global_norm.py)."""

import threading

import numpy as np
import pytest

from tests.updaters.test_updaters import DATA, ThreadStore, assert_params_close, params, run
from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import SerialIterator
from trainer_run.errors import ConfigError, Diverged
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.models import MLP
from trainer_run.updaters import ParallelUpdater, StandardUpdater, updater_of
from trainer_run.updaters.clipping import GlobalNormClip, global_norm_clip

CLIP = 0.4  # the test run's first gradient norms are 0.09 to 0.99: some updates are clipped
SGD = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}


def make(batch_size=100, cls=StandardUpdater, opt_args=None, seed=3, array_module="numpy",
         **kwargs):
    """The updater of ``tests/test_updaters.make`` (same model, data and order), with ``l1/b``
    at twice the learning rate: its parameters lie in two flat groups, which the global norm
    must span."""
    backend = get_backend(array_module, seed=seed)
    model = MLP(DATA.in_size, DATA.out_size, backend, hidden_sizes=[32, 32])
    model.params()["l1/b"].lr_mult = 2.0
    iterator = SerialIterator(DATA.train, batch_size, rng=np.random.default_rng(7))
    opt = optimizers.create("sgd", **{**SGD, **(opt_args or {})})
    return updater_of(cls, iterator, opt, model, backend=backend, **kwargs)


def on_host(updater, what="data") -> dict:
    """The main model's parameters (or gradients) as float64 host arrays, by name."""
    to_numpy = updater.backend.to_numpy
    return {k: to_numpy(getattr(p, what)).astype(np.float64)
            for k, p in updater.get_model().params().items()}


def check_by_hand(array_module="numpy"):
    """SGD without momentum, ``rescale_grad=0.5``, ``clip_gradient=0.01``: each parameter
    becomes ``w - lr * lr_mult * (clip(0.5 * f * g, -0.01, 0.01) + wd * w)`` with
    ``f = min(c / (|g| + 1e-8), 1)``, ``|g|`` the L2 norm of every gradient together (both
    groups), taken before ``rescale_grad``."""
    args = {"momentum": 0.0, "rescale_grad": 0.5, "clip_gradient": 0.01}
    clipped = make(opt_args=args, clip_global_norm=CLIP, array_module=array_module)
    reference = make(opt_args=args, array_module=array_module)
    assert len(clipped.stores["main"].groups) == 2
    before = on_host(reference)
    reference.compute_gradients(0)
    model = reference.get_model()
    grads = on_host(reference, "grad")
    norm = np.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    factor = min(CLIP / (norm + 1e-8), 1.0)
    expected = {k: before[k] - 0.1 * model.params()[k].lr_mult
                * (np.clip(0.5 * factor * g, -0.01, 0.01) + 1e-3 * before[k])
                for k, g in grads.items()}
    assert factor < 0.5  # the global clip binds,
    assert any((np.abs(0.5 * factor * g) > 0.01).any() for g in grads.values())  # the element-wise too
    clipped.update()
    assert_params_close(on_host(clipped), expected, rtol=1e-5, atol=1e-8)


def test_one_update_equals_a_hand_computation_of_mxnets_rule():
    check_by_hand()


@pytest.mark.gpu
def test_on_cupy_the_norm_and_the_update_are_numpys(cupy):
    """On the device: float16 gradients are squared in float32 (65504, float16's largest, has
    a square far beyond it), and an update equals the hand computation."""
    grads = [np.full(1000, 60000.0), np.linspace(-1, 1, 77)]
    exact = np.sqrt(sum(float((g * g).sum()) for g in grads))
    for dtype in (np.float16, np.float32):
        got = GlobalNormClip(1.0).norm([cupy.asarray(g.astype(dtype)) for g in grads], scale=4.0)
        assert got == pytest.approx(exact / 4.0, rel=1e-3)
    check_by_hand("cupy")


def test_the_norm_is_of_the_gradients_with_the_loss_scale_divided_out():
    """A static loss scale of 1024 and a dynamic one of 8 clip as no scaling does: the norm
    compared with ``max_norm`` is that of the true gradients."""
    plain = run(make(clip_global_norm=CLIP), 10)
    assert_params_close(run(make(clip_global_norm=CLIP, loss_scaler=LossScaler(1024)), 10), plain)
    assert_params_close(run(make(clip_global_norm=CLIP, loss_scaler=DynamicLossScaler(8)), 10),
                        plain)
    assert not np.allclose(run(make(), 10)["l1/W"], plain["l1/W"], rtol=1e-3)  # it clipped


def test_accumulation_parallel_replicas_and_two_workers_clip_the_same_gradient():
    """The norm is of the update's whole gradient: 4 batches of 25 accumulated, 2 replicas of
    50 and 2 workers of 50 each (summed by a kvstore) give the parameters of one batch of 100
    clipped, to float32 rounding."""
    whole = run(make(clip_global_norm=CLIP), 10)
    assert_params_close(run(make(25, accum_grad=4, clip_global_norm=CLIP), 10), whole)
    parallel = make(cls=ParallelUpdater, devices=2, kvstore=kvstores.create("local"),
                    clip_global_norm=CLIP)
    try:
        assert_params_close(run(parallel, 10), whole)
    finally:
        parallel.finalize()
    world = {"n": 2, "barrier": threading.Barrier(2, timeout=60)}
    results = [None, None]

    def train(r):
        results[r] = run(make(kvstore=ThreadStore(world, r), clip_global_norm=CLIP), 10)

    threads = [threading.Thread(target=train, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_params_close(results[0], whole)
    for k in whole:
        np.testing.assert_array_equal(results[0][k], results[1][k])


def poisoned(**kwargs):
    """An updater whose gradient of ``l2/W`` is infinite after each backward, its loss finite."""
    updater = make(clip_global_norm=CLIP, **kwargs)
    grad = updater.get_model().params()["l2/W"].grad
    updater.callbacks.add("backward_on_finish", lambda iteration: grad.__setitem__((0, 0), np.inf))
    return updater


def test_a_non_finite_global_norm_stops_or_skips_by_the_nan_policy():
    stopped = poisoned()
    before = params(stopped)
    with pytest.raises(Diverged, match="gradients' global norm is inf at iteration 1"):
        stopped.update()
    assert_params_close(params(stopped), before, rtol=0, atol=0)  # not applied
    skipping = poisoned(nan_policy="skip")
    run(skipping, 3)
    assert skipping.readings()["skipped_steps"] == 3 and skipping.iteration == 3
    assert_params_close(params(skipping), before, rtol=0, atol=0)
    scaled = poisoned(loss_scaler=DynamicLossScaler(8))
    run(scaled, 2)
    assert scaled.readings() == {"loss_scale": 2.0, "skipped_steps": 2}  # backed off twice
    assert_params_close(params(scaled), before, rtol=0, atol=0)


def test_bad_values_and_dist_async_are_refused_by_name():
    for bad in (0, -1.0, float("inf"), float("nan"), "1", True):
        with pytest.raises(ConfigError, match="clip_global_norm"):
            GlobalNormClip(bad)
    with pytest.raises(ConfigError, match="clip_global_norm needs every gradient.*dist_sync"):
        global_norm_clip(1.0, asynchronous=True)
    assert global_norm_clip(None, asynchronous=True) is None
