"""The synthetic sets (data/synthetic.py): every generator covered, their shapes, labels and values,
deterministic by seed, validation sizes disjoint from training, each generator checking its own
options."""

import numpy as np
import pytest
from helpers import make_synthetic

from trainer_run import data as datasets
from trainer_run.errors import ConfigError

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
