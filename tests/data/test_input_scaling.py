"""dataset.normalize (data/input_scaling.py): unit maps uint8 to the unit interval and refuses floats,
standardize uses the training split only in float64 chunks, an unknown normalization is refused."""

import numpy as np
import pytest

from tests.data.test_prepare import _all, _rng
from trainer_run.data import prepare
from trainer_run.errors import ConfigError


def test_unit_maps_uint8_to_the_unit_interval():
    x = np.array([[0, 51, 255]] * 4, np.uint8)
    data = prepare((x, np.array([0, 1, 0, 1])), _rng(), 0.5, normalize="unit")
    got = _all(data.train)[0]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([[0, 0.2, 1.0]] * 2, np.float32))


def test_unit_refuses_float_inputs():
    with pytest.raises(ConfigError, match="dataset.normalize=unit maps unsigned integers"):
        prepare((np.zeros((4, 1), np.float32), np.array([0, 1, 0, 1])), _rng(), 0.5, normalize="unit")


def test_standardize_uses_the_training_split_only_in_float64_chunks(monkeypatch):
    from trainer_run.data import input_scaling
    monkeypatch.setattr(input_scaling, "CHUNK_BYTES", 64)  # many chunks: the merge is exercised
    rng = _rng(1)
    x = (rng.normal(3.0, 2.0, size=(200, 3)) * [1, 10, 0]).astype(np.float32)
    data = prepare((x, np.arange(200) % 2), _rng(), 0.25, normalize="standardize")
    train_rows = data.train.dataset.order
    reference = x[train_rows].astype(np.float64)
    mean, std = reference.mean(axis=0), reference.std(axis=0)
    std[std == 0] = 1
    np.testing.assert_allclose(data.normalization["mean"], mean, rtol=1e-6)
    np.testing.assert_allclose(data.normalization["std"], std, rtol=1e-6)
    vx = _all(data.val)[0]
    expected = (x[data.val.dataset.order] - mean.astype(np.float32)) / std.astype(np.float32)
    np.testing.assert_allclose(vx, expected, rtol=1e-5, atol=1e-6)


def test_an_unknown_normalization_is_refused():
    with pytest.raises(ConfigError, match="dataset.normalize='scale' is unknown"):
        prepare((np.zeros((4, 1), np.float32), np.array([0, 1, 0, 1])), _rng(), 0.5, normalize="scale")


def test_per_channel_standardizes_each_channel_over_its_pixels_of_the_training_split(monkeypatch):
    """Each varying channel of the normalized training split has mean 0 and std 1 over all its
    pixels (its definition); a channel that never varies keeps std 1 and is only centred."""
    from trainer_run.data import input_scaling
    monkeypatch.setattr(input_scaling, "CHUNK_BYTES", 1000)  # many chunks: the merge is exercised
    rng = _rng(2)
    x = rng.normal(size=(120, 3, 5, 4)) * np.array([1.0, 3.0, 0.0])[:, None, None]
    x += np.array([2.0, -1.0, 4.0])[:, None, None]
    data = prepare((x.astype(np.float32), np.arange(120) % 3), _rng(), 0.25, normalize="per_channel")
    values, train = data.normalization, _all(data.train)[0].astype(np.float64)
    assert values["kind"] == "standardize" and values["mean"].shape == (3, 1, 1)
    np.testing.assert_allclose(train.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(train.std(axis=(0, 2, 3))[:2], 1, rtol=1e-5)
    assert values["std"].ravel()[2] == 1.0 and values["mean"].ravel()[2] == 4.0
    val = _all(data.val)[0]
    assert val.shape[1:] == (3, 5, 4) and abs(val[:, 1].mean()) < 0.5  # the same values applied


def test_per_channel_needs_a_channel_axis():
    with pytest.raises(ConfigError, match="dataset.normalize=per_channel needs examples with a channel axis"):
        prepare((np.zeros((4, 3), np.float32), np.array([0, 1, 0, 1])), _rng(), 0.5,
                normalize="per_channel")
