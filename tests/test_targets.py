"""Targets by dotted path (trainer_run.targets.locate): a malformed one is refused before anything is
imported, and one that is no string is refused; a user's own module imports from the current
folder, and nothing else is ever looked up there."""

import importlib
import sys

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


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    """The current folder, on no entry of ``sys.path`` (as for the console scripts), restored
    with ``sys.path`` and the modules imported from it after the test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if getattr(sys.modules[name], "__file__", None) and str(tmp_path) in sys.modules[name].__file__:
            del sys.modules[name]


def test_a_users_module_in_the_current_folder_is_imported_and_the_folder_taken_off_again(folder):
    (folder / "own_models_t.py").write_text("import own_layers_t\n\n\ndef Net():\n    return 1\n")
    (folder / "own_layers_t.py").write_text("")  # a module of the user's that theirs imports
    path = list(sys.path)
    found = locate("own_models_t.Net", "model._target_")
    assert found.__module__ == "own_models_t" and found() == 1
    assert sys.modules["own_models_t"].__file__ == str(folder / "own_models_t.py")
    assert sys.path == path


def test_a_builtin_target_never_makes_the_current_folder_importable(folder):
    (folder / "planted_t.py").write_text(f"open({str(folder / 'PWNED')!r}, 'w').close()\n")
    path = list(sys.path)
    assert locate("trainer_run.models.MLP", "model._target_").__name__ == "MLP"
    assert sys.path == path
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("planted_t")
    assert not (folder / "PWNED").exists()


def test_while_a_users_module_imports_an_installed_module_wins_over_one_in_the_folder(
        folder, monkeypatch):
    """The folder is last on ``sys.path`` while the user's module imports: a ``tabnanny.py``
    beside it is not the standard library's module its code imports."""
    monkeypatch.delitem(sys.modules, "tabnanny", raising=False)
    (folder / "tabnanny.py").write_text(f"open({str(folder / 'PWNED')!r}, 'w').close()\n")
    (folder / "own_models_s.py").write_text("import tabnanny\n\n\ndef Net():\n    return tabnanny\n")
    assert locate("own_models_s.Net", "model._target_")().__file__ != str(folder / "tabnanny.py")
    assert not (folder / "PWNED").exists()


def test_a_module_found_nowhere_is_one_line_naming_it(folder):
    with pytest.raises(ConfigError) as e:
        locate("not_here_t.Net", "model._target_")
    assert str(e.value) == ("model._target_=not_here_t.Net: cannot import it (No module named "
                            "'not_here_t'); a module of your own must be importable from the folder "
                            "you run the command in")


def test_a_users_module_that_imports_a_missing_one_names_the_missing_one(folder):
    (folder / "own_models_m.py").write_text("import missing_dependency_t\n")
    with pytest.raises(ConfigError, match=r"^model\._target_=own_models_m\.Net: cannot import it "
                                          r"\(No module named 'missing_dependency_t'\)"):
        locate("own_models_m.Net", "model._target_")
