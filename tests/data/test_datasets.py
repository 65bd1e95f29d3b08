"""Datasets (array-backed, subsets, random splits, synthetic sets) and the converter."""

import numpy as np
import pytest
from helpers import make_synthetic

from trainer_run import data as datasets
from trainer_run.converter import concat_examples
from trainer_run.data import ArrayDataset, SubDataset, split_random
from trainer_run.errors import ConfigError


def _arrays(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    t = np.arange(n, dtype=np.int32) * 7
    return x, t


class ListDataset:
    """A dataset with only len and getitem (no take)."""

    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


# ---------------------------------------------------------------- ArrayDataset


def test_array_dataset_len_getitem_take():
    x, t = _arrays()
    ds = ArrayDataset(x, t)
    assert len(ds) == 10
    xi, ti = ds[4]
    np.testing.assert_array_equal(xi, [12, 13, 14])
    assert ti == 28
    bx, bt = ds.take([7, 0, 7])
    np.testing.assert_array_equal(bx, x[[7, 0, 7]])
    np.testing.assert_array_equal(bt, [49, 0, 49])


def test_array_dataset_rejects_unequal_lengths():
    with pytest.raises(ConfigError):
        ArrayDataset(np.zeros(3), np.zeros(4))
    with pytest.raises(ConfigError):
        ArrayDataset()


# ------------------------------------------------------------------ SubDataset


def _stack(examples):
    return tuple(np.stack(col) for col in zip(*examples))


@pytest.mark.parametrize("with_take", [True, False], ids=["array", "list"])
def test_sub_dataset_take_equals_stacked_examples(with_take):
    x, t = _arrays()
    base = ArrayDataset(x, t) if with_take else ListDataset([(x[i], t[i]) for i in range(10)])
    sub = SubDataset(base, [9, 2, 5, 0])
    assert len(sub) == 4
    np.testing.assert_array_equal(sub[1][0], x[2])
    assert sub[1][1] == t[2]
    indices = np.array([3, 1, 1])
    got = sub.take(indices)
    expected = _stack([sub[int(i)] for i in indices])
    assert len(got) == 2
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(got[1], t[[0, 2, 2]])


def test_sub_dataset_of_sub_dataset():
    x, t = _arrays()
    inner = SubDataset(ArrayDataset(x, t), [8, 6, 4, 2])
    outer = SubDataset(inner, [3, 0])
    np.testing.assert_array_equal(outer.take(np.array([0, 1]))[1], t[[2, 8]])
    assert outer[0][1] == t[2]


# ---------------------------------------------------------------- split_random


def test_split_random_sizes_disjoint_and_covering():
    x, t = _arrays(25)
    ds = ArrayDataset(x, t)
    first, rest = split_random(ds, 8, np.random.default_rng(0))
    assert (len(first), len(rest)) == (8, 17)
    a, b = set(first.order.tolist()), set(rest.order.tolist())
    assert not a & b
    assert a | b == set(range(25))
    # the examples are those of the underlying dataset at those positions
    np.testing.assert_array_equal(first.take(np.arange(8))[1], t[first.order])
    assert first.order.tolist() != sorted(first.order.tolist())  # shuffled, not a prefix


def test_split_random_is_seeded():
    ds = ArrayDataset(*_arrays(20))
    a, _ = split_random(ds, 5, np.random.default_rng(1))
    b, _ = split_random(ds, 5, np.random.default_rng(1))
    np.testing.assert_array_equal(a.order, b.order)


@pytest.mark.parametrize("size", [0, 10, 11])
def test_split_random_rejects_bad_sizes(size):
    with pytest.raises(ConfigError):
        split_random(ArrayDataset(*_arrays(10)), size, np.random.default_rng(0))


# -------------------------------------------------------------- synthetic sets

GENERATORS = ("blobs", "mnist_like", "regression", "spirals")


def _all(dataset):
    return dataset.take(np.arange(len(dataset)))


def _concat(data):
    tx, tt = _all(data.train)
    vx, vt = _all(data.val)
    return np.concatenate([tx, vx]), np.concatenate([tt, vt])


EXPECTED = {  # name -> (in_size, out_size, task)
    "spirals": (2, 2, "classification"),
    "blobs": (2, 3, "classification"),
    "regression": (8, 1, "regression"),
    "mnist_like": (784, 10, "classification"),
}


def test_every_generator_is_covered():
    assert set(GENERATORS) == set(EXPECTED)
    from trainer_run.compose.options import OPTIONS, option_section

    targets = {option_section("dataset", o)["_target_"] for o in OPTIONS["dataset"]}
    assert {f"trainer_run.data.{name}" for name in GENERATORS} <= targets


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_make_synthetic_shapes(name):
    size = 300
    data = make_synthetic(name, size, 0.2, np.random.default_rng(0))
    in_size, out_size, task = EXPECTED[name]
    assert (data.in_size, data.out_size, data.task) == (in_size, out_size, task)
    assert len(data.train) + len(data.val) == size
    x, t = _concat(data)
    assert x.shape == (size, in_size)
    assert x.dtype == np.float32
    if task == "regression":
        assert t.dtype.kind == "f" and t.shape == (size, out_size)
    else:
        assert t.dtype.kind == "i" and t.shape == (size,)
        assert set(np.unique(t).tolist()) == set(range(out_size))


def test_spirals_balanced_labels():
    x, t = _concat(make_synthetic("spirals", 200, 0.25, np.random.default_rng(0)))
    assert np.bincount(t).tolist() == [100, 100]


def test_mnist_like_values_in_unit_interval():
    x, _ = _concat(make_synthetic("mnist_like", 100, 0.1, np.random.default_rng(0)))
    assert x.min() >= 0.0 and x.max() <= 1.0
    assert x.min() == 0.0 and x.max() == 1.0  # noise is clipped at both ends


def test_regression_options():
    data = make_synthetic("regression", 50, 0.2, np.random.default_rng(0), n_features=3, n_targets=2)
    assert (data.in_size, data.out_size, data.task) == (3, 2, "regression")
    x, y = _concat(data)
    assert x.shape == (50, 3) and y.shape == (50, 2) and y.dtype == np.float32


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_make_synthetic_deterministic(name):
    def arrays(seed):
        data = make_synthetic(name, 60, 0.25, np.random.default_rng(seed))
        return _all(data.train) + _all(data.val)

    for a, b in zip(arrays(7), arrays(7)):
        np.testing.assert_array_equal(a, b)
    first, other = arrays(7), arrays(8)
    assert not np.array_equal(first[0], other[0])  # train inputs differ with the seed


@pytest.mark.parametrize("size,fraction", [(100, 0.2), (7, 0.3), (10, 0.55), (1000, 0.123)])
def test_make_synthetic_val_size(size, fraction):
    data = make_synthetic("blobs", size, fraction, np.random.default_rng(0))
    assert len(data.val) == round(size * fraction)
    assert len(data.train) == size - round(size * fraction)


def test_make_synthetic_train_val_disjoint():
    data = make_synthetic("spirals", 40, 0.25, np.random.default_rng(0))
    assert not set(data.train.order.tolist()) & set(data.val.order.tolist())


def test_a_generator_checks_its_own_options():
    with pytest.raises(ConfigError, match="^noise must be >= 0, got -1$"):
        datasets.spirals(10, np.random.default_rng(0), noise=-1)
    with pytest.raises(ConfigError, match="^n_classes must be >= 2, got 1$"):
        datasets.blobs(10, np.random.default_rng(0), n_classes=1)


# ------------------------------------------------------------------- converter


def test_concat_examples_tuples():
    batch = [(np.array([1.0, 2.0]), 3), (np.array([4.0, 5.0]), 6)]
    x, t = concat_examples(batch)
    np.testing.assert_array_equal(x, [[1.0, 2.0], [4.0, 5.0]])
    np.testing.assert_array_equal(t, [3, 6])


def test_concat_examples_dicts():
    batch = [{"x": np.array([1, 2]), "t": np.int32(0)}, {"x": np.array([3, 4]), "t": np.int32(1)}]
    out = concat_examples(batch)
    assert set(out) == {"x", "t"}
    np.testing.assert_array_equal(out["x"], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(out["t"], [0, 1])
    assert out["t"].dtype == np.int32


def test_concat_examples_bare_arrays():
    batch = [np.full((2, 2), i, dtype=np.float32) for i in range(3)]
    out = concat_examples(batch)
    assert out.shape == (3, 2, 2) and out.dtype == np.float32
    np.testing.assert_array_equal(out[:, 0, 0], [0, 1, 2])


def test_concat_examples_from_dataset_matches_take():
    ds = ArrayDataset(*_arrays())
    indices = [4, 1, 9]
    for a, b in zip(concat_examples([ds[i] for i in indices]), ds.take(indices)):
        np.testing.assert_array_equal(a, b)


def test_concat_examples_empty_batch():
    with pytest.raises(ValueError):
        concat_examples([])


@pytest.mark.parametrize("name, size, fraction, classes", [("blobs", 3, 0.34, 3), ("mnist_like", 6, 0.5, 10)])
def test_out_size_is_the_declared_class_count_even_when_a_class_is_not_drawn(name, size, fraction, classes):
    assert make_synthetic(name, size, fraction, np.random.default_rng(3)).out_size == classes
