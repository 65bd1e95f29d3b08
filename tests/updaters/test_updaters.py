"""Updaters from Python: accumulation, parallel replicas and loss scaling against the plain
standard update they must equal; overflow handling; callbacks; fp16 master weights."""

import numpy as np
import pytest
from helpers import make_synthetic

from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import SerialIterator
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.models import MLP
from trainer_run.updaters import ParallelUpdater, StandardUpdater, updater_of

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
    return updater_of(cls, iterator, opt, model, backend=backend, **kwargs)


def params(updater) -> dict:
    return {k: p.data.copy() for k, p in updater.get_model().params().items()}


def run(updater, n) -> dict:
    for _ in range(n):
        updater.update()
    return params(updater)


def assert_params_close(a, b, rtol=2e-5, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


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
