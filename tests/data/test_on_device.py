"""``dataset.on_device``: a split copied onto the device once gives the batches of the host
pipeline, value for value, and the same run bit for bit (on NumPy the device is the host, so
the array code that runs on a GPU is checked here against the host path)."""

import json

import numpy as np
import pytest
from helpers import load_npz, one_error_line, read_jsonl, run_cli

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


RUN = ("dataset=mnist_like", "dataset.size=600", "model.hidden_sizes=[16]", "trainer.log_interval=10",
       "trainer.eval_interval=20", "trainer.progress=false")


@pytest.mark.parametrize("normalize", ["none", "standardize"])
def test_a_run_with_its_data_on_the_device_is_the_host_run_bit_for_bit(tmp_path, normalize):
    runs = {}
    for choice in ("true", "false"):
        out = tmp_path / choice
        result = run_cli(*RUN, f"dataset.normalize={normalize}", "trainer.max_iterations=40",
                         f"dataset.on_device={choice}", f"hydra.run.dir={out}")
        assert result.returncode == 0, result.stderr
        runs[choice] = out
    got, expected = load_npz(runs["true"] / "model.npz"), load_npz(runs["false"] / "model.npz")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert read_jsonl(runs["true"] / "metrics.jsonl")[-1]["val/loss"] == \
        read_jsonl(runs["false"] / "metrics.jsonl")[-1]["val/loss"]


def test_a_resumed_run_with_its_data_on_the_device_continues_bit_for_bit(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    for out, iterations in ((straight, 40), (split, 20)):
        result = run_cli(*RUN, "dataset.on_device=true", f"trainer.max_iterations={iterations}",
                         f"hydra.run.dir={out}")
        assert result.returncode == 0, result.stderr
    result = run_cli(f"resume={split}", "trainer.max_iterations=40")
    assert result.returncode == 0, result.stderr
    got, expected = load_npz(split / "model.npz"), load_npz(straight / "model.npz")
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert json.loads((split / "summary.json").read_text())["iteration"] == 40


@pytest.mark.parametrize("overrides, fragment", [
    (("dataset.on_device=true", "updater.prefetch=2"), "set one of them"),
    (("dataset.on_device=maybe",), "dataset.on_device"),
])
def test_a_wrong_choice_is_one_line(tmp_path, overrides, fragment):
    result = run_cli(*RUN, *overrides, f"hydra.run.dir={tmp_path / 'run'}")
    assert fragment in one_error_line(result)
