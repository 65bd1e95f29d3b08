"""The checks every input array passes when a run's data is loaded (data/input_checks.py, through
data.prepare): numbers, at least one value an example, finite, and within the run's dtype after the
cast; each refusal names where the data came from."""

import numpy as np
import pytest

from trainer_run.data import ArrayDataset, Splits, prepare
from trainer_run.errors import ConfigError


def _rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize("x, words", [
    (np.array([["a", "b"]] * 20), "the inputs are strings (<U1)"),
    (np.array([[b"a"]] * 20), "the inputs are bytes (|S1)"),
    (np.array([[1, "a"]] * 20, dtype=object), "the inputs are Python objects (object)"),
    (np.ones((20, 2), complex), "the inputs are complex numbers (complex128)"),
    (np.array(["2020-01-01"] * 20, "datetime64[D]")[:, None], "the inputs are dates (datetime64[D])"),
])
def test_inputs_that_are_not_numbers_are_refused_naming_the_file_and_dtype(x, words):
    with pytest.raises(ConfigError) as e:
        prepare(Splits((x, np.arange(20) % 2), origin={"train": "d.npz"}), _rng(), 0.2)
    assert str(e.value).startswith(f"d.npz: {words} and a model trains on numbers; ")


def test_an_input_of_strings_in_a_second_split_or_a_second_input_is_refused_too():
    x, y = np.zeros((20, 2), np.float32), np.arange(20) % 2
    with pytest.raises(ConfigError, match=r"^v\.npz: the inputs are strings"):
        prepare(Splits((x, y), val=(np.array([["a", "b"]] * 20), y),
                       origin={"train": "t.npz", "val": "v.npz"}), _rng(), 0.2)
    with pytest.raises(ConfigError, match=r"^my\.load: the inputs are strings"):
        prepare((x, np.array(["a"] * 20), y), _rng(), 0.2, origin="my.load")


@pytest.mark.parametrize("x, y", [
    (np.array([[True, False]] * 20), np.arange(20) % 2),
    (np.arange(40, dtype=np.uint8).reshape(20, 2), np.arange(20) % 2),
    (np.arange(40, dtype=np.int64).reshape(20, 2), np.linspace(0, 1, 20)),
])
def test_booleans_and_integers_are_numbers(x, y):
    assert prepare((x, y), _rng(), 0.2).in_shape == (2,)


@pytest.mark.parametrize("shape", [(20, 0), (20, 3, 0), (20, 0, 5), (20, 2, 2, 0)])
def test_examples_that_hold_no_values_are_refused(shape):
    x = np.zeros(shape, np.float32)
    with pytest.raises(ConfigError, match=r"^d\.npz: each example's inputs have shape \(.*0.*\), "
                       "which holds no values; give at least one feature$"):
        prepare(Splits((x, np.arange(20) % 2), origin={"train": "d.npz"}), _rng(), 0.2)


def test_a_pair_of_datasets_is_checked_by_its_first_example():
    def pair(x):
        return ArrayDataset(x, np.arange(len(x)) % 2), ArrayDataset(x[:4], np.arange(4) % 2)
    with pytest.raises(ConfigError, match=r"^my\.pair: the inputs are strings"):
        prepare(pair(np.array([["a"]] * 10)), _rng(), 0.2, origin="my.pair")
    with pytest.raises(ConfigError, match=r"^my\.pair: each example's inputs have shape \(0,\)"):
        prepare(pair(np.zeros((10, 0))), _rng(), 0.2, origin="my.pair")


@pytest.mark.parametrize("big", [1e39, -1e300, np.finfo(np.float64).max])
def test_float64_inputs_beyond_float32_are_refused_after_the_cast(big):
    x = np.ones((30, 3))
    x[21, 1] = big
    with pytest.raises(ConfigError) as e:
        prepare(Splits((x, np.arange(30) % 2), origin={"train": "d.npz"}), _rng(), 0.2)
    assert str(e.value) == ("d.npz: the inputs hold values beyond the range of float32, which the "
                            "run reads them in (largest 3.403e+38; first at example 21); they "
                            "would become infinity: scale them down")


def test_float16_runs_check_against_float16_unless_standardized():
    x = np.ones((30, 3), np.float32)
    x[7, 0] = 1e5
    splits = Splits((x, np.arange(30) % 2), origin={"train": "d.npz"})
    with pytest.raises(ConfigError, match=r"beyond the range of float16, .* \(largest 6\.55e\+04; "
                       r"first at example 7\); .* or choose precision=fp32 or "
                       r"dataset.normalize=standardize$"):
        prepare(splits, _rng(), 0.2, dtype="float16")
    assert prepare(splits, _rng(), 0.2, dtype="float16", normalize="standardize").in_shape == (3,)
    assert prepare(splits, _rng(), 0.2, dtype="float32").in_shape == (3,)
    wide = np.full((30, 3), 1e300)
    assert prepare((wide, np.arange(30) % 2), _rng(), 0.2, dtype="float64").in_shape == (3,)


def test_nan_is_still_named_as_nan_before_the_range(tmp_path):
    x = np.ones((30, 3))
    x[4, 0], x[9, 0] = 1e300, np.nan
    with pytest.raises(ConfigError, match=r"NaN or infinity \(first at example 9\)"):
        prepare((x, np.arange(30) % 2), _rng(), 0.2)
