"""Inputs a run cannot train on, each refused in one ``error:`` line that names where it came
from, exit 2, before the run directory is written (issue 36, items 5, 6 and 8): a malformed
``_target_``; inputs that are not numbers or hold no values; values beyond the dtype the run
reads them in; an empty label cell of a CSV table; a user's loader that returns something
other than arrays, a dataset or Splits."""

import numpy as np
import pytest
from helpers import run_cli

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
