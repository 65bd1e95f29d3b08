"""No module of the library (src/trainer_run) or the command (cli/) reaches into another
module's private names: no ``from X import _name``, no import of a private module
(``numpy._core...``), no ``X._name`` on a name bound by an import. A private name is one that
starts with ``_`` and is not a dunder (``__version__``); ``self._x`` is a module's own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"trainer_run": ROOT / "src" / "trainer_run", "trainer_run.cli": ROOT / "cli"}

ALLOWED = {
    # os._exit is the standard library's documented way to leave at once without running
    # cleanup (after a fork, or when a signal handler must end the process): public despite
    # its name
    "os._exit",
    # Hydra 1.3 (pinned < 1.4) has no public way to add a config folder beside the primary one,
    # which --config-dir does; compose/composer.py builds the search path as hydra.main does so
    # that trainer_run.train composes and records what the command does (docs/architecture.md)
    "from hydra._internal.hydra import Hydra",
    "from hydra._internal.utils import create_config_search_path",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(path: Path) -> tuple[str, bool]:
    """The dotted name of the module at ``path`` and whether it is a package's ``__init__``."""
    for package, folder in PACKAGES.items():
        if path.is_relative_to(folder) and (package == "trainer_run.cli" or
                                            not path.is_relative_to(PACKAGES["trainer_run.cli"])):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join([package, *(p for p in parts if p != "__init__")])
            return name, path.name == "__init__.py"
    raise ValueError(path)


def _imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of the module a (possibly relative) ``from ... import`` reads."""
    if not node.level:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def private_uses(source: str, module: str, is_package: bool = False) -> list[str]:
    """Each use in ``source`` (the module ``module``) of another module's private name, as
    ``line: what``, e.g. ``24: from numpy._core._multiarray_umath import _load_from_filelike``."""
    tree = ast.parse(source)
    found, bound = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _imported_from(node, module, is_package)
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
                if _private(alias.name) or any(_private(p) for p in origin.split(".")):
                    found.append((node.lineno, f"from {origin} import {alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
                if any(_private(p) for p in alias.name.split(".")):
                    found.append((node.lineno, f"import {alias.name}"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and _private(node.attr)):
            found.append((node.lineno, f"{bound[node.value.id]}.{node.attr}"))
    return [f"{line}: {what}" for line, what in sorted(found)
            if what.removeprefix("import ") not in ALLOWED]


def test_no_module_uses_another_module_s_private_names():
    found = []
    for folder in PACKAGES.values():
        for path in sorted(folder.rglob("*.py")):
            module, is_package = _module_of(path)
            found += [f"{path.relative_to(ROOT)}:{use}"
                      for use in private_uses(path.read_text(), module, is_package)]
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_the_scan_finds_each_form_of_a_private_use():
    source = """
from numpy._core._multiarray_umath import _load_from_filelike
from ..errors import _hidden
from .plot_layout import _name as name
import numpy._core
from . import storage
import trainer_run.runs.weights as weights
storage._write()
weights._cache
"""
    assert private_uses(source, "trainer_run.training.loggers.plot") == [
        "2: from numpy._core._multiarray_umath import _load_from_filelike",
        "3: from trainer_run.training.errors import _hidden",
        "4: from trainer_run.training.loggers.plot_layout import _name",
        "5: import numpy._core",
        "8: trainer_run.training.loggers.storage._write",
        "9: trainer_run.runs.weights._cache",
    ]


def test_a_module_s_own_private_names_dunders_and_the_allowed_pass():
    source = """
from __future__ import annotations
from trainer_run import __version__
import os

def _mine():
    return _mine

class Thing:
    def __init__(self):
        self._x = 1

os._exit(0)
Thing()._x
"""
    assert private_uses(source, "trainer_run.cli.entry") == []
