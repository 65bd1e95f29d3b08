"""Targets by dotted path (trainer_run.targets.locate): a malformed one is refused before anything is
imported, and one that is no string is refused."""

import pytest

from trainer_run.errors import ConfigError
from trainer_run.targets import locate


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
