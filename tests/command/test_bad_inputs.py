"""Inputs a run cannot train on, each refused in one ``error:`` line that names where it came
from, exit 2, before the run directory is written (issue 36, items 5, 6 and 8): a malformed
``_target_``; inputs that are not numbers or hold no values; values beyond the dtype the run
reads them in; an empty label cell of a CSV table; a user's loader that returns something
other than arrays, a dataset or Splits."""

import numpy as np
import pytest
from helpers import run_cli

SHORT = ("trainer.max_iterations=4", "model.hidden_sizes=[4]", "dataset.batch_size=4",
         "hydra.run.dir=run")


def _refused(result, tmp_path) -> str:
    """The one line a refused command printed (exit 2, no traceback, no run directory)."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not (tmp_path / "run").exists()
    return lines[0]


# -------------------------------------------------------------------------------- _target_


@pytest.mark.parametrize("argument", ["+model._target_=..", "+dataset._target_=.x",
                                      "optimizer._target_=..Foo", "+callbacks.c._target_=x..y"])
def test_a_malformed_target_on_the_command_line_is_one_line(tmp_path, argument):
    line = _refused(run_cli(argument, *SHORT, cwd=tmp_path), tmp_path)
    assert "must be a dotted path of Python names" in line


# ------------------------------------------------------------------- inputs that are not numbers


@pytest.mark.parametrize("x, name", [(np.array([["a", "b"]] * 40), "strings.npz"),
                                     (np.zeros((40, 0), np.float32), "empty.npz"),
                                     (np.ones((40, 2), np.complex64), "complex.npz")])
def test_the_command_refuses_such_inputs_before_the_run_directory_is_written(tmp_path, x, name):
    np.savez(tmp_path / name, x=x, y=np.arange(40) % 2)
    line = _refused(run_cli("dataset=npz", f"dataset.path={name}", *SHORT, cwd=tmp_path), tmp_path)
    assert line.startswith(f"error: {name}: ")


# --------------------------------------------------------------- values beyond the run's dtype


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


def test_the_command_refuses_an_empty_label_cell(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,species\n" + "".join(
        f"{i},{i % 3},{'setosa' if i % 2 else 'virginica'}\n" for i in range(30)) + "1,2,\n")
    line = _refused(run_cli("dataset=csv", "dataset.path=t.csv", *SHORT, cwd=tmp_path), tmp_path)
    assert line == ("error: dataset.path=t.csv: the target column 'species' is empty in row 32; "
                    "an empty cell is NaN and a label cannot be: fill it or drop the row")


# ----------------------------------------------------------------------- what a loader returns
EXPECTED = ("a dataset callable returns arrays (x, y) with one row per example (convert Python "
            "lists with numpy.asarray), one dataset (len and [i] giving a tuple of arrays, the "
            "label last), a (train, val) pair of datasets, a trainer_run.data.Splits or a "
            "trainer_run.data.Data")


def test_the_command_names_a_loader_that_returns_lists(tmp_path):
    (tmp_path / "my_data.py").write_text(
        "def load():\n    return [[0.5, 1.0]] * 40, [0, 1] * 20\n")
    line = _refused(run_cli("+dataset._target_=my_data.load", *SHORT, cwd=tmp_path), tmp_path)
    assert line == f"error: my_data.load returned a tuple of (list of 40, list of 40); {EXPECTED}"
