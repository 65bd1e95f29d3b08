"""SerialIterator: Chainer's batching, epoch bookkeeping, shuffling and state round-trip."""

import copy
import json

import numpy as np
import pytest

from trainer_run.data import SerialIterator

DATASET = [f"ex{i}" for i in range(10)]


def test_repeat_without_shuffle_two_epochs():
    it = SerialIterator(DATASET, 3, repeat=True, shuffle=False)
    assert (it.epoch, it.epoch_detail, it.previous_epoch_detail, it.is_new_epoch) == (0, 0.0, None, False)
    # (indices, epoch, epoch_detail, previous_epoch_detail, is_new_epoch) after each next()
    expected = [
        ([0, 1, 2], 0, 0.3, 0.0, False),
        ([3, 4, 5], 0, 0.6, 0.3, False),
        ([6, 7, 8], 0, 0.9, 0.6, False),
        ([9, 0, 1], 1, 1.2, 0.9, True),
        ([2, 3, 4], 1, 1.5, 1.2, False),
        ([5, 6, 7], 1, 1.8, 1.5, False),
        ([8, 9, 0], 2, 2.1, 1.8, True),
        ([1, 2, 3], 2, 2.4, 2.1, False),
    ]
    for indices, epoch, detail, previous, new in expected:
        assert it.next() == [DATASET[i] for i in indices]
        assert it.epoch == epoch
        assert it.epoch_detail == pytest.approx(detail)
        assert it.previous_epoch_detail == pytest.approx(previous)
        assert it.is_new_epoch is new


def test_exact_epoch_boundary_is_new_epoch():
    it = SerialIterator(DATASET, 5, repeat=True, shuffle=False)
    assert list(it.next_indices()) == [0, 1, 2, 3, 4] and not it.is_new_epoch
    assert list(it.next_indices()) == [5, 6, 7, 8, 9] and it.is_new_epoch
    assert (it.epoch, it.epoch_detail) == (1, 1.0)
    assert list(it.next_indices()) == [0, 1, 2, 3, 4] and not it.is_new_epoch


def test_no_repeat_last_batch_short_then_stop():
    it = SerialIterator(DATASET, 3, repeat=False, shuffle=False)
    assert [it.next() for _ in range(3)] == [DATASET[0:3], DATASET[3:6], DATASET[6:9]]
    assert it.next() == [DATASET[9]]
    assert it.is_new_epoch and it.epoch == 1 and it.epoch_detail == 1.0
    with pytest.raises(StopIteration):
        it.next()
    with pytest.raises(StopIteration):
        it.next_indices()


def test_no_repeat_as_python_iterator():
    it = SerialIterator(DATASET, 4, repeat=False, shuffle=False)
    assert list(it) == [DATASET[0:4], DATASET[4:8], DATASET[8:10]]


def test_shuffle_each_epoch_is_a_permutation():
    n, batch_size, epochs = 12, 4, 4
    it = SerialIterator(list(range(n)), batch_size, repeat=True, shuffle=True,
                        rng=np.random.default_rng(0))
    orders = []
    for _ in range(epochs):
        epoch = np.concatenate([it.next_indices() for _ in range(n // batch_size)])
        assert it.is_new_epoch
        np.testing.assert_array_equal(np.sort(epoch), np.arange(n))
        orders.append(epoch)
    assert not all(np.array_equal(orders[0], o) for o in orders[1:])  # reshuffled
    assert not np.array_equal(orders[0], np.arange(n))


def test_shuffle_without_repeat_covers_dataset_once():
    it = SerialIterator(list(range(10)), 3, repeat=False, shuffle=True,
                        rng=np.random.default_rng(3))
    seen = np.concatenate([it.next_indices() for _ in range(4)])
    np.testing.assert_array_equal(np.sort(seen), np.arange(10))
    with pytest.raises(StopIteration):
        it.next_indices()


def test_next_and_next_indices_agree():
    data = [f"item{i}" for i in range(10)]
    a = SerialIterator(data, 3, shuffle=True, rng=np.random.default_rng(11))
    b = SerialIterator(data, 3, shuffle=True, rng=np.random.default_rng(11))
    for _ in range(12):
        indices = a.next_indices()
        assert b.next() == [data[int(i)] for i in indices]
        assert (a.epoch, a.epoch_detail, a.is_new_epoch) == (b.epoch, b.epoch_detail, b.is_new_epoch)


def _json_round_trip(state):
    text = json.dumps(state, default=lambda a: a.tolist())
    return json.loads(text)


@pytest.mark.parametrize("transport", [copy.deepcopy, _json_round_trip], ids=["deepcopy", "json"])
@pytest.mark.parametrize("k", [0, 2, 5])
def test_state_round_trip(transport, k):
    data = list(range(10))
    original = SerialIterator(data, 3, shuffle=True, rng=np.random.default_rng(5))
    for _ in range(k):
        original.next_indices()
    state = transport(original.state_dict())

    restored = SerialIterator(data, 3, shuffle=True, rng=np.random.default_rng(999))
    restored.load_state_dict(state)
    assert restored.epoch == original.epoch
    assert restored.epoch_detail == original.epoch_detail
    assert restored.previous_epoch_detail == original.previous_epoch_detail
    assert restored.is_new_epoch == original.is_new_epoch

    for _ in range(20):
        np.testing.assert_array_equal(restored.next_indices(), original.next_indices())
        assert (restored.epoch, restored.epoch_detail, restored.is_new_epoch) == (
            original.epoch, original.epoch_detail, original.is_new_epoch)


def test_state_dict_is_a_snapshot():
    """Advancing the iterator after state_dict() must not change the saved state."""
    it = SerialIterator(list(range(10)), 3, shuffle=True, rng=np.random.default_rng(5))
    it.next_indices()
    state = it.state_dict()
    saved = copy.deepcopy(state)
    for _ in range(7):  # crosses two epoch boundaries, reshuffling the order
        it.next_indices()
    np.testing.assert_array_equal(state["order"], saved["order"])
    assert state["rng"] == saved["rng"]
    assert state["current_position"] == saved["current_position"]


def test_reset_starts_over():
    it = SerialIterator(DATASET, 3, repeat=False, shuffle=False)
    list(it)
    it.reset()
    assert (it.epoch, it.epoch_detail, it.previous_epoch_detail) == (0, 0.0, None)
    assert it.next() == DATASET[0:3]
