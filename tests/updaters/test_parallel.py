"""Parallel replicas in one process (updaters/parallel.py): they equal the standard update on the whole
batch, and their gradients are summed onto the main replica through the kvstore."""

from __future__ import annotations

import numpy as np
import pytest

from tests.updaters.test_updaters import DATA, assert_params_close, make, run
from trainer_run import devices
from trainer_run import kvstore as kvstores
from trainer_run.errors import ConfigError
from trainer_run.updaters import ParallelUpdater


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


class _OnGPU:
    """What ParallelUpdater asks of a CuPy backend before anything else: its device."""

    name, device = "cupy", 0


@pytest.mark.parametrize("visible, asked, words", [
    (1, 2, "devices=2 asks for GPUs 0, 1, but 1 GPU is visible (id 0)"),
    (4, 8, "devices=8 asks for GPUs 0, 1, 2, 3, 4, 5, 6, 7, but 4 GPUs are visible (ids 0, 1, 2, 3)"),
    (2, [0, 2], "devices=[0, 2] asks for GPUs 0, 2, but 2 GPUs are visible (ids 0, 1)"),
    (0, 1, "devices=1 asks for GPU 0, but no GPU is visible"),
])
def test_parallel_updater_refuses_more_gpus_than_visible(monkeypatch, visible, asked, words):
    monkeypatch.setattr(devices, "gpu_count", lambda: visible)
    with pytest.raises(ConfigError) as e:
        ParallelUpdater(None, None, None, devices=asked, backend=_OnGPU())
    assert str(e.value).startswith(words) and "\n" not in str(e.value)
