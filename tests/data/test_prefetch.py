"""Prefetching batches on a background thread (``updater.prefetch``): the batches, the
iterator's state and the updates equal those without prefetching, bit for bit (whole runs:
tests/command/test_prefetch_runs.py); a checkpoint loaded into the iterator mid-way is
followed; a failure in the thread reaches the caller; the thread ends with the run."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import ArrayDataset, SerialIterator, SubDataset
from trainer_run.data.input_scaling import Normalized, fit
from trainer_run.data.prefetch import Prefetcher
from trainer_run.errors import ConfigError
from trainer_run.models import MLP
from trainer_run.updaters import ParallelUpdater, StandardUpdater, updater_of


def dataset(n=103):
    """uint8 pixels normalized to [0, 1] over a subset (the path a prepared run takes)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(n + 7, 16), dtype=np.uint8)
    y = rng.integers(0, 10, size=n + 7).astype(np.int32)
    train = SubDataset(ArrayDataset(x, y), np.arange(3, n + 3))
    return Normalized(train, fit("unit", train, "test"))


def take(data):
    return lambda indices: data.take(indices)


def iterator(data, batch=10, repeat=True, seed=5):
    return SerialIterator(data, batch, repeat=repeat, rng=np.random.default_rng(seed))


def assert_same_batch(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y, strict=True)


def observed(it) -> tuple:
    return it.epoch, it.is_new_epoch, it.epoch_detail, it.previous_epoch_detail, it.current_position


@pytest.mark.parametrize("depth", [1, 3])
def test_batches_and_iterator_state_equal_those_without_prefetch_over_several_epochs(depth):
    """103 examples in batches of 10: 52 batches are 5 epochs, most of them crossing an epoch
    boundary (reshuffled) in the middle of a batch."""
    data = dataset()
    plain, ahead = iterator(data), iterator(data)
    prefetcher = Prefetcher(ahead, take(data), depth)
    try:
        for _ in range(52):
            expected = data.take(plain.next_indices())
            assert_same_batch(prefetcher.next(), expected)
            assert observed(ahead) == observed(plain)
        assert plain.epoch == 5
        state, reference = ahead.state_dict(), plain.state_dict()
        np.testing.assert_array_equal(state.pop("order"), reference.pop("order"))
        assert state == reference
    finally:
        prefetcher.close()


def test_after_the_first_batch_every_batch_is_gathered_on_the_one_background_thread():
    data = dataset()
    threads = []

    def gather(indices):
        threads.append(threading.current_thread().name)
        return data.take(indices)

    prefetcher = Prefetcher(iterator(data), gather, 3)
    try:
        for _ in range(20):
            prefetcher.next()
    finally:
        prefetcher.close()
    here = threading.current_thread().name
    assert threads.count(here) == 1  # the first batch: nothing was gathered ahead yet
    behind = {name for name in threads if name != here}
    assert len(behind) == 1 and behind.pop().startswith("prefetch")
    assert 20 <= len(threads) <= 20 + 3  # the batches drawn, and up to 3 ahead (close cancels)


def test_several_threads_gather_at_once_and_the_batches_come_in_the_iterators_order():
    data = dataset()
    names, started = set(), threading.Barrier(3, timeout=5)

    def gather(indices):
        name = threading.current_thread().name
        if name.startswith("prefetch") and name not in names:
            names.add(name)
            started.wait()  # each thread's first batch waits for the other two: 3 at once
        return data.take(indices)

    plain, ahead = iterator(data), Prefetcher(iterator(data), gather, 6, threads=3)
    try:
        for _ in range(40):
            assert_same_batch(ahead.next(), data.take(plain.next_indices()))
    finally:
        ahead.close()
    assert len(names) == 3 and not started.broken


def test_without_repeat_the_short_last_batch_and_the_stop_are_the_same():
    data = dataset(95)
    plain, ahead = iterator(data, repeat=False), iterator(data, repeat=False)
    prefetcher = Prefetcher(ahead, take(data), 3)
    try:
        for _ in range(2):  # the second pass after reset(): the prefetcher follows it
            sizes = []
            while True:
                try:
                    expected = data.take(plain.next_indices())
                except StopIteration:
                    with pytest.raises(StopIteration):
                        prefetcher.next()
                    break
                batch = prefetcher.next()
                assert_same_batch(batch, expected)
                sizes.append(len(batch[0]))
            assert sizes == [10] * 9 + [5]
            plain.reset()
            ahead.reset()
    finally:
        prefetcher.close()


def test_a_state_loaded_into_the_iterator_mid_way_is_followed_from_the_next_batch():
    """As when a checkpoint is loaded: the batches gathered ahead no longer fit, and the
    prefetcher notices at once, without being told."""
    data = dataset()
    saved = iterator(data)
    for _ in range(7):
        saved.next_indices()
    state = saved.state_dict()
    ahead = iterator(data, seed=99)  # another order altogether
    prefetcher = Prefetcher(ahead, take(data), 3)
    try:
        for _ in range(4):
            prefetcher.next()
        ahead.load_state_dict(state)
        for _ in range(25):
            assert_same_batch(prefetcher.next(), data.take(saved.next_indices()))
    finally:
        prefetcher.close()


class Failing:
    """A dataset whose ``take`` fails on the batch that holds ``bad``."""

    def __init__(self, data, bad):
        self.data, self.bad = data, bad

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]

    def take(self, indices):
        if self.bad in indices:
            raise OSError(f"cannot read example {self.bad}")
        return self.data.take(indices)


def test_an_error_in_the_thread_is_raised_by_the_batch_it_belongs_to():
    data = Failing(dataset(), bad=42)
    plain, ahead = iterator(data), iterator(data)
    batches = [plain.next_indices() for _ in range(11)]
    failing = next(i for i, b in enumerate(batches) if 42 in b)
    prefetcher = Prefetcher(ahead, take(data), 3)
    try:
        for indices in batches[:failing]:
            assert_same_batch(prefetcher.next(), data.take(indices))
        with pytest.raises(OSError, match="cannot read example 42"):
            prefetcher.next()
        # the iterator moved past it, as without prefetch; the next batch is read as usual
        assert_same_batch(prefetcher.next(), data.take(batches[failing + 1]))
    finally:
        prefetcher.close()


def prefetch_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("prefetch")]


def updater(prefetch, data=None, **kwargs):
    data = data if data is not None else dataset()
    backend = get_backend("numpy", seed=3)
    model = MLP(16, 10, backend, hidden_sizes=[8])
    return updater_of(StandardUpdater, iterator(data), optimizers.create("sgd", learning_rate=0.1),
                      model, backend=backend, prefetch=prefetch, **kwargs)


@pytest.mark.parametrize("replicas", [1, 2])
def test_the_updater_draws_the_same_parts_with_prefetch(replicas):
    plain, ahead = updater(0), updater(3)
    try:
        for _ in range(30):
            parts, size = plain.next_parts(plain.get_iterator("main"), [None] * replicas)
            got, got_size = ahead.next_parts(ahead.get_iterator("main"), [None] * replicas)
            assert got_size == size
            for a, b in zip(got, parts):
                assert_same_batch(a, b)
        assert prefetch_threads()
    finally:
        ahead.finalize()
    assert not prefetch_threads()


def test_an_updater_state_loaded_mid_run_continues_as_it_did_from_that_state():
    target = updater(3)
    try:
        for _ in range(5):
            target.update()
        state = target.state_dict()
        for _ in range(12):
            target.update()
        expected = {k: p.data.copy() for k, p in target.get_model().params().items()}
        target.load_state_dict(state)  # batches for iterations 18.. were gathered ahead
        for _ in range(12):
            target.update()
    finally:
        target.finalize()
    for key, value in target.get_model().params().items():
        np.testing.assert_array_equal(value.data, expected[key], err_msg=key, strict=True)


def test_parallel_replicas_train_bit_identically_with_prefetch():
    def trained(prefetch):
        backend = get_backend("numpy", seed=3)
        model = MLP(16, 10, backend, hidden_sizes=[8])
        target = updater_of(ParallelUpdater, iterator(dataset()),
                            optimizers.create("sgd", learning_rate=0.1), model, devices=2,
                            kvstore=kvstores.create("local"), backend=backend, prefetch=prefetch)
        try:
            for _ in range(25):
                target.update()
        finally:
            target.finalize()
        return {k: p.data for k, p in model.params().items()}

    expected, got = trained(0), trained(3)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key, strict=True)


def test_an_error_in_the_thread_reaches_the_update():
    target = updater(2, data=Failing(dataset(), bad=42))
    try:
        with pytest.raises(OSError, match="cannot read example 42"):
            for _ in range(20):
                target.update()
    finally:
        target.finalize()


def test_prefetch_must_be_a_whole_number_of_batches_and_needs_take():
    with pytest.raises(ConfigError, match=r"^prefetch must be >= 0, got -1$"):
        updater(-1)
    with pytest.raises(ConfigError, match=r"^prefetch must be an integer, got 1.5$"):
        updater(1.5)
    with pytest.raises(ConfigError, match=r"^prefetch=2 gathers batches with the dataset's take"):
        updater(2, converter=lambda batch, backend: batch)




def test_dataset_workers_are_bounded_by_the_cores_and_as_many_as_the_cores_get_a_note(monkeypatch):
    from trainer_run.data import prefetch

    monkeypatch.setattr(prefetch.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert prefetch.checked_workers(8) == 8
    with pytest.raises(ConfigError) as refused:
        prefetch.checked_workers(1_000_000)
    assert str(refused.value) == ("dataset.workers=1000000 is more than 4 threads per core of the "
                                  "2 this process may use; choose at most 8 (0: batches are "
                                  "gathered in the training thread)")
    assert prefetch.workers_note(0) is None and prefetch.workers_note(1) is None
    assert prefetch.workers_note(2) == ("note: dataset.workers=2 on 2 cores: its threads compete "
                                        "with training for them and may slow it; try fewer, or 0")
