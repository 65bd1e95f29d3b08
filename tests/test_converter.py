"""Chainer's converter (trainer_run.converter.concat_examples): tuples, dicts and bare arrays stacked
into a batch, as a dataset's take gives it, and an empty batch."""

import numpy as np
import pytest

from tests.data.test_datasets import _arrays
from trainer_run.converter import concat_examples
from trainer_run.data import ArrayDataset


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
