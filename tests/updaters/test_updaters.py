"""Updaters from Python: accumulation, parallel replicas and loss scaling against the plain
standard update they must equal; overflow handling; callbacks; fp16 master weights."""

import numpy as np
import pytest
from helpers import load_npz, make_synthetic, read_jsonl, run_cli

from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.callbacks import HOOKS
from trainer_run.data import SerialIterator
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.models import MLP
from trainer_run.updaters import ParallelUpdater, StandardUpdater

DATA = make_synthetic("spirals", 1000, 0.2, np.random.default_rng(0))  # 800 training examples


def make(batch_size=100, cls=StandardUpdater, optimizer="sgd", dtype="float32", opt_args=None,
         seed=3, **kwargs):
    """An updater over DATA whose model (``seed``), shuffling and data order are seeded."""
    backend = get_backend("numpy", seed=seed, dtype=dtype)
    model = MLP(DATA.in_size, DATA.out_size, backend, hidden_sizes=[32, 32], dtype=dtype)
    iterator = SerialIterator(DATA.train, batch_size, rng=np.random.default_rng(7))
    args = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3} if optimizer == "sgd" else {}
    args.update(opt_args or {})
    opt = optimizers.create(optimizer, multi_precision=dtype == "float16", **args)
    return cls(iterator, opt, model, backend=backend, **kwargs)


def params(updater) -> dict:
    return {k: p.data.copy() for k, p in updater.get_model().params().items()}


def states(updater) -> dict:
    return {k: [a.copy() for a in v] for k, v in updater._appliers["main"].state_dict(
        np.asarray).items()}


def run(updater, n) -> dict:
    for _ in range(n):
        updater.update()
    return params(updater)


def assert_params_close(a, b, rtol=2e-5, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_accumulating_4_batches_of_25_equals_one_batch_of_100(optimizer):
    big, small = make(100, optimizer=optimizer), make(25, optimizer=optimizer, accum_grad=4)
    assert_params_close(run(big, 12), run(small, 12))
    assert small.iteration == big.iteration == 12
    assert small.epoch_detail == big.epoch_detail == 12 * 100 / 800
    assert small.observation["loss"] == pytest.approx(float(big.observation["loss"]), rel=1e-5)


class Fixed:
    """An iterator that hands out the given index arrays, in order."""

    def __init__(self, dataset, batches):
        self.dataset, self.batches = dataset, list(batches)

    def next_indices(self):
        return self.batches.pop(0)

    def finalize(self):
        pass


def gradients(updater) -> dict:
    updater.compute_gradients(0)
    return {k: p.grad.copy() for k, p in updater.get_model().params().items()}


def test_accumulation_weights_batches_by_their_examples():
    """Batches of 30 and 70 examples make the gradient of the union batch of 100, i.e.
    0.3 g30 + 0.7 g70: not the mean of the two batch means, nor nnabla's sum of them."""
    order = np.random.default_rng(1).permutation(len(DATA.train))[:100]

    def grads(batches, accum):
        updater = make(accum_grad=accum)
        updater._iterators["main"] = Fixed(DATA.train, batches)
        return gradients(updater)

    whole, parts = grads([order], 1), grads([order[:30], order[30:]], 2)
    g30, g70 = grads([order[:30]], 1), grads([order[30:]], 1)
    assert_params_close(whole, parts, rtol=1e-5, atol=1e-7)
    assert_params_close(parts, {k: 0.3 * g30[k] + 0.7 * g70[k] for k in g30}, rtol=1e-5, atol=1e-7)
    assert not np.allclose(parts["l1/W"], 0.5 * (g30["l1/W"] + g70["l1/W"]), rtol=1e-2)


@pytest.mark.parametrize("devices", [2, 3, [0, 1]])
def test_parallel_replicas_equal_the_standard_update_on_the_whole_batch(devices):
    """3 replicas split 100 examples 34/33/33: each backward is weighted by its share."""
    standard = make()
    parallel = make(cls=ParallelUpdater, devices=devices, kvstore=kvstores.create("local"))
    try:
        assert_params_close(run(standard, 10), run(parallel, 10))
        main = parallel.stores["main"]
        for store in parallel.replica_stores[1:]:
            for group, source in zip(store.groups, main.groups):
                np.testing.assert_array_equal(group.data, source.data)
        assert float(parallel.observation["loss"]) == pytest.approx(float(standard.observation["loss"]),
                                                                    rel=1e-5)
    finally:
        parallel.finalize()


def test_parallel_sums_gradients_onto_the_main_replica_through_the_kvstore():
    parallel = make(cls=ParallelUpdater, devices=2, kvstore=kvstores.create("device"))
    pushed = []
    original = parallel.kvstore.pushpull
    parallel.kvstore.pushpull = lambda key, values, out: (pushed.append((key, len(values))),
                                                         original(key, values, out=out))
    order = np.random.default_rng(1).permutation(len(DATA.train))[:100]
    parallel._iterators["main"] = Fixed(DATA.train, [order])
    got = gradients(parallel)
    standard = make()
    standard._iterators["main"] = Fixed(DATA.train, [order])
    assert_params_close(got, gradients(standard), rtol=1e-5, atol=1e-7)
    assert pushed == [(k, 2) for k in range(len(parallel.stores["main"].groups))]
    parallel.finalize()


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


def test_state_round_trip_includes_the_scaler_and_refills_replicas():
    first = make(cls=ParallelUpdater, accum_grad=2, loss_scaler=DynamicLossScaler(interval=3),
                 kvstore=kvstores.create("local"))
    run(first, 4)
    state = first.state_dict()
    assert state["loss_scaler"] == {"scale": 16.0, "clean_steps": 1, "retries": 0, "skipped_steps": 0}
    second = make(cls=ParallelUpdater, accum_grad=2, loss_scaler=DynamicLossScaler(interval=3),
                  kvstore=kvstores.create("local"))
    second.load_state_dict(state)
    for store in second.replica_stores:
        for group, source in zip(store.groups, first.stores["main"].groups):
            np.testing.assert_array_equal(group.data, source.data)
    a, b = run(first, 3), run(second, 3)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    first.finalize()
    second.finalize()
    with pytest.raises(ValueError, match="no loss scaler"):
        make(loss_scaler=LossScaler()).load_state_dict(make().state_dict())


def test_the_state_records_the_number_of_workers_and_a_resume_says_what_another_changes():
    """A checkpoint of 2 workers (global batch 2 x 50) resumed by 1 process of batch 50: one
    sentence with both counts and both global batches; the same count, or a state from before
    the count was saved, says nothing."""
    first = make(batch_size=50)
    state = first.state_dict()
    assert state["num_workers"] == 1
    resumed = make(batch_size=50)
    resumed.load_state_dict(state)
    assert (resumed.saved_num_workers, resumed.workers_change()) == (1, None)
    resumed.load_state_dict({k: v for k, v in state.items() if k != "num_workers"})  # an old one
    assert (resumed.saved_num_workers, resumed.workers_change()) == (None, None)
    resumed.load_state_dict({**state, "num_workers": 2})
    assert resumed.workers_change() == (
        "the checkpoint was written by 2 worker process(es), this run has 1: the global batch "
        "changes from 100 to 50 examples (50 per worker), so the resumed run is not the same run "
        "and not bit-identical to one that went on with 2")


@pytest.mark.parametrize("updater", ["standard", "parallel"])
def test_resume_with_accumulation_and_dynamic_scaling_is_bit_identical(tmp_path, updater):
    """fp16 with a scale that overflows every few steps (it grows every 4 clean steps past
    float16's range), cut at iteration 15 and resumed: the same parameters, bit for bit,
    and the same training log (skipped steps and scale included; the cut run also evaluated
    at its last iteration, 15)."""
    common = [f"updater={updater}", "updater.accum_grad=3", "loss_scale=dynamic", "precision=fp16",
              "loss_scale.scale=32768", "loss_scale.interval=4", "trainer.progress=false",
              "trainer.log_interval=5", "trainer.eval_interval=10", "trainer.checkpoint_interval=10"]
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    assert run_cli(*common, "trainer.max_iterations=30", f"hydra.run.dir={straight}").returncode == 0
    assert run_cli(*common, "trainer.max_iterations=15", f"hydra.run.dir={cut}").returncode == 0
    resumed = run_cli(f"resume={cut}", "trainer.max_iterations=30")
    assert resumed.returncode == 0, resumed.stderr
    a, b = load_npz(straight / "model.npz"), load_npz(cut / "model.npz")
    for k in a:
        assert a[k].dtype == np.float16
        np.testing.assert_array_equal(a[k], b[k])
    rows_a, rows_b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(cut / "metrics.jsonl")
    for row in rows_a + rows_b:
        row.pop("elapsed_s")
        row.pop("time")
    rows_b[2] = {k: v for k, v in rows_b[2].items() if not k.startswith("val/")}
    assert rows_a == rows_b
    assert rows_a[-1]["skipped_steps"] > rows_a[2]["skipped_steps"]  # overflows after the cut


class ThreadStore:
    """A stand-in for an MPI store: ``n`` workers in threads, pushpull sums over all of them."""

    type = "dist_sync"

    def __init__(self, world: dict, rank: int):
        self.world, self.rank, self.num_workers = world, rank, world["n"]

    def init(self, key, value):
        pass

    def broadcast(self, key, value, out):
        if self.rank == 0:
            self.world[key] = value.copy()
        self.world["barrier"].wait()
        out[...] = self.world[key]
        self.world["barrier"].wait()

    def pushpull(self, key, values, out):
        local = values[0].copy()
        for v in values[1:]:
            local += v
        self.world[(key, self.rank)] = local
        self.world["barrier"].wait()
        out[...] = sum(self.world[(key, r)] for r in range(self.num_workers))
        self.world["barrier"].wait()


def test_two_workers_of_a_shard_each_equal_one_process_of_the_global_batch():
    """Each worker draws the same global batch of 100 and computes its 50 (example j to worker
    j % 2); the summed gradient is the global batch's. Worker 1 starts from other parameters:
    rank 0's are broadcast."""
    import threading

    world = {"n": 2, "barrier": threading.Barrier(2, timeout=60)}
    results = [None, None]

    def train(r):
        results[r] = run(make(seed=3 + r, kvstore=ThreadStore(world, r)), 10)

    threads = [threading.Thread(target=train, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_params_close(results[0], run(make(), 10))
    for k in results[0]:
        np.testing.assert_array_equal(results[0][k], results[1][k])

