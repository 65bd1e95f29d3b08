"""``dataset.on_device``: a split copied onto the device once gives the batches of the host
pipeline, value for value, and the same run bit for bit (on NumPy the device is the host, so
the array code that runs on a GPU is checked here against the host path)."""


import numpy as np
import pytest

from trainer_run.backend import Backend
from trainer_run.data import ArrayDataset, SubDataset, input_scaling, on_device
from trainer_run.data import datasets as data_sets


def _split(kind: str):
    """A split as a run holds it: a shuffled sub-dataset of uint8 or float inputs and integer
    labels, normalized by ``kind``."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (60, 1, 4, 4), dtype=np.uint8)
    if kind == "standardize":
        x = rng.normal(3.0, 2.0, (60, 5)).astype(np.float32)
    split = SubDataset(ArrayDataset(x, rng.integers(0, 3, 60)), rng.permutation(60)[:45])
    values = input_scaling.fit(kind, split, "test")
    return input_scaling.applied(values)(split)


@pytest.mark.parametrize("kind", ["none", "unit", "standardize"])
def test_a_split_on_the_device_gives_the_host_batches_value_for_value(kind):
    split = _split(kind)
    placed = on_device.OnDevice(split, Backend("numpy"))
    assert len(placed) == len(split)
    for indices in (np.array([3, 0, 44, 7]), np.arange(45), np.array([], dtype=np.int64)):
        for got, expected in zip(placed.take(indices), data_sets.take(split, indices)):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
    for got, expected in zip(placed[5], split[5]):  # a user's converter reads the host split
        np.testing.assert_array_equal(got, expected)


def test_the_splits_go_on_the_device_as_chosen():
    data = data_sets.Data(train=_split("unit"), val=_split("none"), in_shape=(1, 4, 4),
                          out_size=3, task="classification")
    numpy_backend = Backend("numpy")
    assert on_device.placed(data, numpy_backend, None, 0) is data  # the host is NumPy's device
    assert on_device.placed(data, numpy_backend, False, 0) is data
    both = on_device.placed(data, numpy_backend, True, 0)
    assert isinstance(both.train, on_device.OnDevice) and isinstance(both.val, on_device.OnDevice)
    assert on_device.raw_bytes(data.train) == 45 * 16 + 45 * 8  # uint8 pixels, int64 labels


@pytest.mark.gpu
def test_on_a_gpu_the_splits_go_there_and_give_the_host_batches(cupy):
    data = data_sets.Data(train=_split("unit"), val=_split("standardize"), in_shape=(1, 4, 4),
                          out_size=3, task="classification")
    placed = on_device.placed(data, Backend("cupy"), None, 0)  # a few kB fit any GPU
    assert isinstance(placed.train, on_device.OnDevice)
    indices = np.array([9, 2, 30])
    for split, host in ((placed.train, data.train), (placed.val, data.val)):
        for got, expected in zip(split.take(indices), data_sets.take(host, indices)):
            assert isinstance(got, cupy.ndarray)
            np.testing.assert_array_equal(cupy.asnumpy(got), expected)
