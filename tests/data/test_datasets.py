"""Datasets (array-backed, subsets, random splits, synthetic sets) and the converter."""

import numpy as np
import pytest
from helpers import make_synthetic

from tests.command.test_bad_inputs import EXPECTED
from trainer_run.data import ArrayDataset, Splits, SubDataset, prepare, split_random
from trainer_run.errors import ConfigError, UserCodeError


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



# ------------------------------------------------------------------- converter


@pytest.mark.parametrize("name, size, fraction, classes", [("blobs", 3, 0.34, 3), ("mnist_like", 6, 0.5, 10)])
def test_out_size_is_the_declared_class_count_even_when_a_class_is_not_drawn(name, size, fraction, classes):
    assert make_synthetic(name, size, fraction, np.random.default_rng(3)).out_size == classes


def _rng():
    return np.random.default_rng(0)


LISTS = [[0.5, 1.0, 2.0]] * 20


@pytest.mark.parametrize("result, what", [
    ((LISTS, [0, 1] * 10), "a tuple of (list of 20, list of 20)"),
    ((np.array(LISTS), [0, 1] * 10), "a tuple of (ndarray of shape (20, 3), list of 20)"),
    ([np.array(LISTS), np.arange(20) % 2], "a list of (ndarray of shape (20, 3), ndarray of shape "
                                           "(20,)), not a tuple"),
    (LISTS, "a list whose examples are list, not tuples"),
    ([], "an empty list"),
    (np.array(LISTS), "an array of shape (20, 3) alone"),
    (None, "NoneType"),
    ({"x": np.array(LISTS)}, "dict"),
])
def test_a_loader_returning_something_else_is_named_with_what_it_returned(result, what):
    with pytest.raises(ConfigError) as e:
        prepare(result, _rng(), 0.2, origin="my_data.load")
    assert str(e.value) == f"my_data.load returned {what}; {EXPECTED}"


def test_splits_holding_lists_are_refused_naming_the_loader_and_split():
    with pytest.raises(ConfigError) as e:
        prepare(Splits((np.zeros((20, 2)), np.arange(20) % 2), val=(LISTS, [0] * 20)), _rng(), 0.2,
                origin="my_data.load")
    assert str(e.value) == ("my_data.load: the val split holds a list where an array belongs; every "
                            "part of a split is an array with one row per example (convert Python "
                            "lists with numpy.asarray)")


def test_a_list_of_example_tuples_is_a_dataset():
    examples = [(np.array([i, 2.0 * i], np.float32), i % 2) for i in range(20)]
    data = prepare(examples, _rng(), 0.2, origin="my_data.load")
    assert (data.in_shape, len(data.train) + len(data.val)) == ((2,), 20)


# ---------------------------------------------------------------- the user's datasets


class Raising(ListDataset):
    def __getitem__(self, i):
        if i == 3:
            raise LookupError("no example 3")
        return super().__getitem__(i)


def test_a_users_dataset_that_raises_or_changes_shape_is_named_in_one_line():
    rng = np.random.default_rng(0)
    good = [(np.zeros(2, np.float32), np.int64(i % 2)) for i in range(10)]
    with pytest.raises(UserCodeError, match=r"^dataset \(tests.data.test_datasets.Raising\) "
                                            r"raised LookupError: no example 3$") as raised:
        prepare(Raising(good), rng)
    assert isinstance(raised.value.__cause__, LookupError)  # its traceback is the user's
    shaped = [*good[:7], (np.zeros(3, np.float32), np.int64(1)), *good[8:]]
    expected = (r"^dataset \(tests.data.test_datasets.ListDataset\).__getitem__\(\) returned "
                r"example 7 of another shape than the first: parts of shapes \(3,\), \(\) where "
                r"the first has parts of shapes \(2,\), \(\); ")
    with pytest.raises(UserCodeError, match=expected):
        prepare(ListDataset(shaped), rng)  # one dataset, read whole at start
    pair = prepare((ListDataset(good), ListDataset(shaped[5:])), rng)  # read as the run reads
    with pytest.raises(UserCodeError, match=expected.replace("example 7", "example 2")):
        pair.val[2]  # val is shaped as train
    data = prepare((ListDataset(good), ListDataset(good[:4])), rng)
    assert len(data.train) == 10 and data.train[4] is good[4]  # the user's examples, as they are
