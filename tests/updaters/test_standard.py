"""StandardUpdater (updaters/standard.py) from Python: its parts built beforehand, and Chainer's
update from the iterator, optimizer and model alone; accumulation against one large batch, loss
scaling against none, an overflow skipped or retried, float16 with float32 masters, and the
callbacks in order."""

import inspect

import numpy as np
import pytest

from tests.updaters.test_parallel import LinearRegression, WholeBatch, shard_gradient
from tests.updaters.test_updaters import assert_params_close, make, params, run
from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.callbacks import HOOKS
from trainer_run.errors import Diverged
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.updaters import ParallelUpdater, StandardUpdater


def test_the_updater_takes_its_parts_built_in_at_most_10_parameters():
    names = list(inspect.signature(StandardUpdater.__init__).parameters)
    assert names == ["self", "iterator", "optimizer", "model", "batches", "verdict", "sync",
                     "loss_func", "callbacks", "profiler"]
    assert len(names) <= 10
    parallel = inspect.signature(ParallelUpdater.__init__).parameters
    assert set(parallel) == {*names, "devices", "grad_reduce"} - {"loss_func"}


def test_the_iterator_optimizer_and_model_alone_make_chainers_update():
    """NumPy, no kvstore, no scaling: one SGD step moves the weights by -lr * the mean squared
    error's gradient, in closed form; a NaN loss stops the run before its update."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 3)).astype("float32")
    t = rng.normal(size=(6, 1)).astype("float32")
    w, b = [[0.5, -1.0, 2.0]], [0.25]
    updater = StandardUpdater(WholeBatch([(x[j], t[j]) for j in range(6)]),
                              optimizers.create("sgd", learning_rate=0.1), LinearRegression(w, b))
    assert (updater.backend, updater.kvstore, updater.readings()) == (None, None, {})
    updater.update()
    grad_w, grad_b = shard_gradient(*(np.asarray(a, dtype=np.float64) for a in (x, t, w, b)))
    model = updater.get_model()
    np.testing.assert_allclose(model.w.data[0], np.asarray(w[0]) - 0.1 * grad_w, rtol=1e-5)
    np.testing.assert_allclose(model.b.data, np.asarray(b) - 0.1 * grad_b, rtol=1e-5)
    model.w.data[0, 0] = np.nan
    with pytest.raises(Diverged, match=r"^the training loss is nan at iteration 2; the update"):
        updater.update()


def states(updater) -> dict:
    return {k: [a.copy() for a in v] for k, v in updater._appliers["main"].state_dict(
        np.asarray).items()}


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_accumulating_4_batches_of_25_equals_one_batch_of_100(optimizer):
    big, small = make(100, optimizer=optimizer), make(25, optimizer=optimizer, accum_grad=4)
    assert_params_close(run(big, 12), run(small, 12))
    assert small.iteration == big.iteration == 12
    assert small.epoch_detail == big.epoch_detail == 12 * 100 / 800
    assert small.observation["loss"] == pytest.approx(float(big.observation["loss"]), rel=1e-5)


@pytest.mark.parametrize("optimizer,args", [
    ("sgd", {}), ("adam", {"learning_rate": 0.01}),
    ("rmsprop", {"clip_gradient": 0.05, "rescale_grad": 0.5}), ("lamb", {}),
])
def test_static_scale_1024_equals_no_scaling_in_float32(optimizer, args):
    """The scale is a power of two: scaling and unscaling (through rescale_grad) commute with
    float32 rounding, so the result is the same to the last bit here; rtol allows rounding."""
    plain = make(optimizer=optimizer, opt_args=args)
    scaled = make(optimizer=optimizer, opt_args=args, loss_scaler=LossScaler(1024))
    assert_params_close(run(plain, 8), run(scaled, 8), rtol=1e-6, atol=0)
    assert scaled.get_optimizer("main").rescale_grad == args.get("rescale_grad", 1.0)
    assert scaled.readings() == {"loss_scale": 1024.0}


def overflowing(at: set, **kwargs):
    """A float16 updater whose first gradient gets an inf at the iterations in ``at`` (once per
    iteration: a retry of the same iteration computes clean gradients)."""
    updater = make(dtype="float16", optimizer="adam", opt_args={"learning_rate": 0.01}, **kwargs)
    first = next(iter(updater.get_model().params().values()))
    hit = set()

    def inject(i):
        if i in at and i not in hit:
            hit.add(i)
            first.grad.flat[0] = np.inf

    updater.callbacks.add("backward_on_finish", inject)
    return updater


def test_overflow_skips_the_step_halves_the_scale_and_training_continues():
    scaler = DynamicLossScaler(scale=1024, interval=1000)
    updater = overflowing({3}, loss_scaler=scaler)
    run(updater, 3)
    before, before_states = params(updater), states(updater)
    optimizer = updater.get_optimizer("main")
    count, epoch = optimizer.num_update, updater.epoch_detail
    updater.update()
    assert scaler.scale == 512 and scaler.skipped_steps == 1 and scaler.clean_steps == 0
    assert updater.iteration == 4 and optimizer.num_update == count == 3
    assert updater.epoch_detail == epoch + 100 / 800  # one batch drawn
    after = params(updater)
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    for k, arrays in states(updater).items():
        for a, b in zip(arrays, before_states[k]):
            np.testing.assert_array_equal(a, b)
    assert updater.readings() == {"loss_scale": 512.0, "skipped_steps": 1}
    run(updater, 2)
    assert optimizer.num_update == 5 and scaler.clean_steps == 2
    assert not np.array_equal(params(updater)["l1/W"], after["l1/W"])


def test_overflow_with_retry_recomputes_on_new_data():
    scaler = DynamicLossScaler(scale=1024, interval=1000, on_overflow="retry", max_retries=3)
    updater = overflowing({2}, loss_scaler=scaler, accum_grad=2)
    run(updater, 2)
    epoch = updater.epoch_detail
    updater.update()
    assert scaler.scale == 512 and scaler.skipped_steps == 0
    assert updater.get_optimizer("main").num_update == 3
    assert updater.epoch_detail == epoch + 2 * 2 * 100 / 800  # 2 batches, retried once


def test_fp16_runs_in_float16_with_float32_master_weights():
    updater = make(dtype="float16", optimizer="adam", opt_args={"learning_rate": 0.01},
                   loss_scaler=DynamicLossScaler())
    run(updater, 5)
    model_params = updater.get_model().params()
    assert all(p.data.dtype == np.float16 and p.grad.dtype == np.float16 for p in model_params.values())
    store_states = updater._appliers["main"].states
    for index, p in enumerate(model_params.values()):
        master = store_states[index][0]
        assert master.dtype == np.float32
        np.testing.assert_array_equal(p.data, master.astype(np.float16))


def test_callbacks_fire_in_order_with_the_iteration():
    log = []
    hooks = {h: (lambda i, h=h: log.append((h, i))) for h in HOOKS}
    standard = make(accum_grad=2, callbacks=hooks)
    run(standard, 2)
    per_batch = ["forward_on_start", "forward_on_finish", "backward_on_start", "backward_on_finish"]
    expected = [(h, i) for i in range(2) for h in per_batch * 2 + ["update_on_start", "update_on_finish"]]
    assert log == expected
    log.clear()
    parallel = make(cls=ParallelUpdater, callbacks=hooks, kvstore=kvstores.create("local"))
    run(parallel, 1)
    parallel.finalize()
    assert [h for h, _ in log] == per_batch + ["comm_on_start", "comm_on_finish", "update_on_start",
                                               "update_on_finish"]
