"""The rules from a loader's arrays to a run's data: task, labels, hold-out split, checks and
normalization (trainer_run.data.prepare and input_scaling), against hand computations."""

import numpy as np
import pytest

from trainer_run.data import ArrayDataset, Splits, prepare, stratified_positions
from trainer_run.data.prepare import whole_number_hint
from trainer_run.errors import ConfigError


def _rng(seed=0):
    return np.random.default_rng(seed)


def _all(dataset):
    return dataset.take(np.arange(len(dataset)))


# ------------------------------------------------------------------------------- task rule
@pytest.mark.parametrize("labels, task, out_size", [
    (np.array([0, 2, 1, 2] * 5, np.int64), "classification", 3),
    (np.array([True, False] * 10), "classification", 2),
    (np.array(["cat", "dog", "ant", "dog"] * 5), "classification", 3),
    (np.linspace(0, 1, 20), "regression", 1),
    (np.zeros((20, 3), np.float64), "regression", 3),
])
def test_auto_decides_from_the_labels_type(labels, task, out_size):
    data = prepare((np.zeros((20, 2), np.float32), labels), _rng(), 0.25)
    assert (data.task, data.out_size) == (task, out_size)
    assert "auto" in data.note


def test_string_labels_become_ids_in_sorted_order_with_their_names():
    names = np.array(["dog", "cat", "emu", "cat", "dog", "emu"] * 4)
    x = np.arange(24, dtype=np.float32)[:, None]
    data = prepare((x, names), _rng(), 0.25)
    assert data.classes == ["cat", "dog", "emu"]
    xs, ids = _all(data.train)
    expected = {"cat": 0, "dog": 1, "emu": 2}
    assert ids.tolist() == [expected[names[int(v)]] for v in xs[:, 0]]


def test_whole_number_floats_get_a_hint_under_auto_only():
    y = np.array([0.0, 1.0, 2.0, 1.0] * 5)
    auto = prepare((np.zeros((20, 2), np.float32), y), _rng(), 0.25)
    assert auto.task == "regression" and "hint: " in auto.note and "dataset.task=classification" in auto.note
    forced = prepare((np.zeros((20, 2), np.float32), y), _rng(), 0.25, task="classification")
    assert forced.task == "classification" and forced.out_size == 3 and "hint" not in forced.note
    assert _all(forced.train)[1].dtype == np.int32
    assert whole_number_hint(np.array([0.5, 1.0])) is None


@pytest.mark.parametrize("labels, task, words", [
    (np.array([0.0, 0.5] * 10), "classification", "whole-number class ids"),
    (np.array([0, -1] * 10), "auto", "is negative"),
    (np.array(["a", "b"] * 10), "regression", "numeric targets"),
    (np.zeros((20, 2), np.int64), "classification", "one class id per example"),
    (np.array([0, 1] * 10), "guess", "dataset.task='guess' is unknown"),
])
def test_labels_that_do_not_fit_the_task_are_refused_naming_the_source(labels, task, words):
    with pytest.raises(ConfigError, match=words) as error:
        prepare(Splits((np.zeros((20, 2), np.float32), labels), origin={"train": "my.npz"}), _rng(),
                0.25, task=task)
    assert "my.npz" in str(error.value) or "dataset.task" in str(error.value)


def test_a_declared_class_count_bounds_the_labels():
    with pytest.raises(ConfigError, match="out of range for 3 classes"):
        prepare((np.zeros((6, 1), np.float32), np.array([0, 1, 3, 0, 1, 2])), _rng(), 0.5, n_classes=3)
    data = prepare((np.zeros((6, 1), np.float32), np.array([0, 1] * 3)), _rng(), 0.5, n_classes=5)
    assert data.out_size == 5


def test_a_class_only_in_the_test_split_is_refused():
    splits = Splits((np.zeros((4, 1)), np.array(["a", "b", "a", "b"])),
                    test=(np.zeros((2, 1)), np.array(["a", "c"])),
                    origin={"train": "tr.csv", "test": "te.csv"})
    with pytest.raises(ConfigError, match=r"te.csv: class \['c'\] is not among the training labels"):
        prepare(splits, _rng(), 0.5)


def test_a_numeric_class_only_in_the_validation_split_is_refused_with_its_count():
    splits = Splits((np.zeros((4, 1)), np.array([0, 1, 0, 1])),
                    val=(np.zeros((5, 1)), np.array([0, 7, 7, 1, 7])),
                    origin={"train": "tr.npz", "val": "va.npz"})
    with pytest.raises(ConfigError, match=r"va.npz: class \[7\] is not among the training labels "
                       r"\(3 examples there have it\)"):
        prepare(splits, _rng(), 0.5)


@pytest.mark.parametrize("huge", [3e9, 1e9, 2**62, 1_000_000])
def test_a_class_id_beyond_the_bound_is_refused_with_its_position(huge):
    labels = np.array([0, 1, 0, 1, huge, 0], dtype=type(huge))
    with pytest.raises(ConfigError, match=r"d.npz: label \[.*\] \(example \[4\]\) is beyond the "
                       "1,000,000 classes"):
        prepare(Splits((np.zeros((6, 1), np.float32), labels), origin={"train": "d.npz"}), _rng(),
                0.5, task="classification")


def test_class_ids_that_skip_values_give_a_hint():
    labels = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 200] * 2)
    data = prepare((np.zeros((22, 1), np.float32), labels), _rng(), 0.5)
    assert data.out_size == 201
    assert "\nhint: the labels run 0..200 with 11 distinct values" in data.note


# ---------------------------------------------------------------------------------- checks
def test_arrays_of_different_lengths_are_refused():
    with pytest.raises(ConfigError, match="x.npy and y.npy: the inputs have 10 examples and the labels 9"):
        prepare(Splits((np.zeros((10, 2)), np.zeros(9, np.int64)), origin={"train": "x.npy and y.npy"}),
                _rng(), 0.2)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_infinity_in_the_inputs_names_the_first_example(bad):
    x = np.zeros((30, 4), np.float32)
    x[17, 2] = bad
    x[25, 0] = bad
    with pytest.raises(ConfigError, match="d.npz: the inputs hold NaN or infinity \\(first at example 17\\)"):
        prepare(Splits((x, np.zeros(30, np.int64)), origin={"train": "d.npz"}), _rng(), 0.2)


def test_nan_in_regression_targets_is_refused():
    with pytest.raises(ConfigError, match="targets hold NaN"):
        prepare((np.zeros((4, 1), np.float32), np.array([0.5, np.nan, 1.0, 2.0])), _rng(), 0.5)


# -------------------------------------------------------------------------------- hold-out
def test_stratified_positions_keep_every_class_share():
    labels = np.array([0] * 50 + [1] * 30 + [2] * 20)
    first, rest = stratified_positions(labels, 20, _rng(3))
    assert len(first) == 20 and len(rest) == 80
    assert sorted(first.tolist() + rest.tolist()) == list(range(100))
    assert np.bincount(labels[first]).tolist() == [10, 6, 4]  # 20% of each class
    again, _ = stratified_positions(labels, 20, _rng(3))
    assert again.tolist() == first.tolist()
    other, _ = stratified_positions(labels, 20, _rng(4))
    assert other.tolist() != first.tolist()


def test_stratified_remainders_go_to_the_largest_fractions():
    labels = np.array([0] * 5 + [1] * 3 + [2] * 2)  # shares of 4 places: 2.0, 1.2, 0.8
    first, _ = stratified_positions(labels, 4, _rng(0))
    assert np.bincount(labels[first], minlength=3).tolist() == [2, 1, 1]


def test_a_held_out_split_is_stratified_for_classification_and_random_for_regression():
    y = np.array([0] * 80 + [1] * 20)
    data = prepare((np.arange(100, dtype=np.float32)[:, None], y), _rng(), 0.1)
    assert np.bincount(_all(data.val)[1]).tolist() == [8, 2]
    assert len(data.train) == 90
    reg = prepare((np.arange(100, dtype=np.float32)[:, None], np.arange(100.0)), _rng(), 0.1)
    vx, vy = _all(reg.val)
    assert len(vx) == 10 and np.array_equal(vx[:, 0], vy[:, 0])


def test_a_given_validation_split_is_used_as_it_is():
    splits = Splits((np.zeros((8, 1), np.float32), np.arange(8) % 2),
                    val=(np.ones((3, 1), np.float32), np.array([1, 0, 1])))
    data = prepare(splits, _rng(), 0.5)
    assert len(data.train) == 8 and _all(data.val)[1].tolist() == [1, 0, 1]


def test_images_gain_a_channel_axis_and_keep_their_shape():
    x = np.zeros((10, 5, 7), np.uint8)
    data = prepare((x, np.arange(10) % 2), _rng(), 0.2)
    assert data.in_shape == (1, 5, 7) and data.in_size == 35
    assert _all(data.train)[0].shape == (8, 1, 5, 7)


# --------------------------------------------------------------------------- normalization


# ------------------------------------------------------------------------ what loaders return
def test_a_tuple_of_more_arrays_keeps_every_input_and_the_labels_last():
    a, b = np.arange(10.0)[:, None], np.arange(10.0)[:, None] * 2
    data = prepare((a, b, np.arange(10) % 2), _rng(), 0.2)
    xa, xb, t = _all(data.train)
    np.testing.assert_array_equal(xb, xa * 2)
    assert t.tolist() == (xa[:, 0].astype(int) % 2).tolist()


def test_one_dataset_is_split_like_arrays():
    data = prepare(ArrayDataset(np.arange(10.0)[:, None], np.arange(10) % 2), _rng(), 0.2)
    assert (len(data.train), len(data.val)) == (8, 2)


def test_something_else_is_refused_naming_what_a_callable_returns():
    with pytest.raises(ConfigError, match="my.load returned dict; a dataset callable returns"):
        prepare({"x": 1}, _rng(), 0.2, origin="my.load")
