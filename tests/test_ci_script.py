"""CI (.ci/run) runs the README's test command as it is written, with the lint in between:
``ruff check`` over every Python folder, by the repo's ruff.toml, and ``lint-imports``, the
layers of pyproject.toml's ``[tool.importlinter]``, after the install and before the tests;
ruff and import-linter are in the ``test`` extra and pinned in constraints.txt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = ("ruff check cli src tests benchmarks", "lint-imports")


def _ci_commands() -> list[str]:
    """The commands .ci/run runs after making the environment fresh, split at ``&&``."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    start = lines.index("rm -rf .venv") + 1
    commands = []
    for line in lines[start:]:
        if line.strip() and not line.lstrip().startswith("#"):
            commands += [part.strip() for part in line.split("&&")]
    return commands


def _readme_test_command() -> list[str]:
    """The README's test command (the line that installs the ``test`` extra and runs pytest),
    split at ``&&``."""
    found = [line for line in (ROOT / "README.md").read_text().splitlines()
             if 'pip install -c constraints.txt ".[test]"' in line and "pytest" in line]
    assert len(found) == 1, found
    return [part.strip() for part in found[0].split("&&")]


def test_ci_runs_the_readme_s_test_command_with_the_lint_before_the_tests():
    commands = _ci_commands()
    readme = _readme_test_command()
    assert [c for c in commands if c not in LINT] == readme
    # after the install, before pytest
    assert commands[len(readme) - 1:len(readme) + 1] == list(LINT)
    assert readme[-1] == "python -m pytest"


@pytest.mark.parametrize("tool", ["ruff", "import-linter"])
def test_the_lint_is_in_the_test_extra_and_pinned(tool):
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(re.match(rf"{tool}\b", r) for r in pyproject["project"]["optional-dependencies"]["test"])
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.startswith(f"{tool}==")]
    assert len(pins) == 1 and re.fullmatch(rf"{tool}==\d+\.\d+(\.\d+)?", pins[0])
    assert (ROOT / "ruff.toml").exists() and "importlinter" in pyproject["tool"]


def test_every_package_of_the_library_is_installed():
    """A non-editable install (CI's) holds only the packages pyproject.toml lists: a new folder
    of modules left out of the list imports here and fails there."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    source = ROOT / "src" / "trainer_run"
    folders = {".".join(("trainer_run", *p.parent.relative_to(source).parts))
               for p in source.rglob("__init__.py")}
    assert sorted(folders - listed) == []
