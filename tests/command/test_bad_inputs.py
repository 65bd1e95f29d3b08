"""Inputs a run cannot train on, each refused in one ``error:`` line that names where it came
from, exit 2, before the run directory is written (issue 36, items 5, 6 and 8): a malformed
``_target_``; inputs that are not numbers or hold no values; values beyond the dtype the run
reads them in; an empty label cell of a CSV table; a user's loader that returns something
other than arrays, a dataset or Splits."""

import numpy as np
import pytest
from helpers import run_cli

from trainer_run.data import ArrayDataset, Splits, csv_files, prepare
from trainer_run.errors import ConfigError
from trainer_run.targets import locate

SHORT = ("trainer.max_iterations=4", "model.hidden_sizes=[4]", "dataset.batch_size=4",
         "hydra.run.dir=run")


def _rng():
    return np.random.default_rng(0)


def _refused(result, tmp_path) -> str:
    """The one line a refused command printed (exit 2, no traceback, no run directory)."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not (tmp_path / "run").exists()
    return lines[0]


# -------------------------------------------------------------------------------- _target_
@pytest.mark.parametrize("path", ["..", ".x", "..Foo", "x..y", "", ".", "os.", "1abc.f", "a.b-c.d",
                                  "a .b", "my models.X"])
def test_a_malformed_target_is_refused_before_anything_is_imported(path):
    with pytest.raises(ConfigError) as e:
        locate(path, "model._target_")
    assert str(e.value) == ("model._target_ must be a dotted path of Python names like "
                            f"'my_package.module.Name', got {path!r}")


@pytest.mark.parametrize("value", [5, None, ["a.b"], {"a": "b"}, True])
def test_a_target_that_is_no_string_is_refused(value):
    with pytest.raises(ConfigError, match=r"^optimizer\._target_ must be a dotted path"):
        locate(value, "optimizer._target_")


@pytest.mark.parametrize("argument", ["+model._target_=..", "+dataset._target_=.x",
                                      "optimizer._target_=..Foo", "+callbacks.c._target_=x..y"])
def test_a_malformed_target_on_the_command_line_is_one_line(tmp_path, argument):
    line = _refused(run_cli(argument, *SHORT, cwd=tmp_path), tmp_path)
    assert "must be a dotted path of Python names" in line


# ------------------------------------------------------------------- inputs that are not numbers
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


@pytest.mark.parametrize("x, name", [(np.array([["a", "b"]] * 40), "strings.npz"),
                                     (np.zeros((40, 0), np.float32), "empty.npz"),
                                     (np.ones((40, 2), np.complex64), "complex.npz")])
def test_the_command_refuses_such_inputs_before_the_run_directory_is_written(tmp_path, x, name):
    np.savez(tmp_path / name, x=x, y=np.arange(40) % 2)
    line = _refused(run_cli("dataset=npz", f"dataset.path={name}", *SHORT, cwd=tmp_path), tmp_path)
    assert line.startswith(f"error: {name}: ")


# --------------------------------------------------------------- values beyond the run's dtype
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


def test_the_command_refuses_float64_beyond_float32_instead_of_diverging(tmp_path):
    x = np.ones((40, 2))
    x[3] = 1e300
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.arange(40) % 2)
    line = _refused(run_cli("dataset=npy", "dataset.x_path=x.npy", "dataset.y_path=y.npy", *SHORT,
                            cwd=tmp_path), tmp_path)
    assert line == ("error: x.npy and y.npy: the inputs hold values beyond the range of float32, "
                    "which the run reads them in (largest 3.403e+38; first at example 3); they "
                    "would become infinity: scale them down")


# ------------------------------------------------------------------------------ CSV tables
def _table(tmp_path, rows, header="a,b,y"):
    path = tmp_path / "t.csv"
    path.write_text("".join(f"{r}\n" for r in ([header] if header else []) + rows))
    return str(path)


@pytest.mark.parametrize("last", ["3,4,", "3,4, ", '3,4,""'])
@pytest.mark.parametrize("labels", ["0 1", "a b", "0.5 1.5"])
def test_an_empty_label_cell_is_refused_naming_its_row(tmp_path, labels, last):
    names = labels.split()
    path = _table(tmp_path, [f"{i},{i},{names[i % 2]}" for i in range(10)] + [last])
    with pytest.raises(ConfigError) as e:
        csv_files.csv(path, target="y")
    assert str(e.value) == (f"path={path}: the target column 'y' is empty in row 12; an empty cell "
                            "is NaN and a label cannot be: fill it or drop the row")


def test_an_empty_label_cell_without_a_header_and_in_the_validation_table(tmp_path):
    path = _table(tmp_path, ["1,2,0", ",3,1", "4,5,"], header=None)
    with pytest.raises(ConfigError, match=r"the target column 2 is empty in row 3;"):
        csv_files.csv(path)
    train = _table(tmp_path, ["1,2,0", "2,3,1"])
    (tmp_path / "v.csv").write_text("a,b,y\n1,2,\n")
    with pytest.raises(ConfigError, match=r"^val_path=.*v\.csv: the target column 'y' is empty in "
                       "row 2"):
        csv_files.csv(train, val_path=str(tmp_path / "v.csv"))


def test_an_empty_feature_cell_is_still_nan(tmp_path):
    x, y = csv_files.csv(_table(tmp_path, ["1,,0", "2,3,1"])).train
    assert np.isnan(x[0, 1]) and y.tolist() == [0, 1]


@pytest.mark.parametrize("cell", ["1e39", "-4e38", "1e300"])
def test_a_feature_beyond_float32_is_refused_naming_the_cell(tmp_path, cell):
    path = _table(tmp_path, ["1,2,0", f"2,{cell},1", "3,4,0"])
    with pytest.raises(ConfigError) as e:
        csv_files.csv(path)
    assert str(e.value) == (f"path={path}: column 'b' holds {float(cell):g} in row 3, beyond the "
                            "range of float32 (largest 3.403e+38) that features are read in; "
                            "scale it down")


def test_the_command_refuses_an_empty_label_cell(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,species\n" + "".join(
        f"{i},{i % 3},{'setosa' if i % 2 else 'virginica'}\n" for i in range(30)) + "1,2,\n")
    line = _refused(run_cli("dataset=csv", "dataset.path=t.csv", *SHORT, cwd=tmp_path), tmp_path)
    assert line == ("error: dataset.path=t.csv: the target column 'species' is empty in row 32; "
                    "an empty cell is NaN and a label cannot be: fill it or drop the row")


# ----------------------------------------------------------------------- what a loader returns
LISTS = [[0.5, 1.0, 2.0]] * 20
EXPECTED = ("a dataset callable returns arrays (x, y) with one row per example (convert Python "
            "lists with numpy.asarray), one dataset (len and [i] giving a tuple of arrays, the "
            "label last), a (train, val) pair of datasets, a trainer_run.data.Splits or a "
            "trainer_run.data.Data")


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


def test_the_command_names_a_loader_that_returns_lists(tmp_path):
    (tmp_path / "my_data.py").write_text(
        "def load():\n    return [[0.5, 1.0]] * 40, [0, 1] * 20\n")
    line = _refused(run_cli("+dataset._target_=my_data.load", *SHORT, cwd=tmp_path), tmp_path)
    assert line == f"error: my_data.load returned a tuple of (list of 40, list of 40); {EXPECTED}"
