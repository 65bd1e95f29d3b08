"""The names of a run's files (and a sweep's) are spelled once: each is a constant of the module
that owns it (:mod:`trainer_run.storage.run_files` for a run folder's), and every other module of the
library and the command imports it. A string literal equal to one of these names anywhere else
(docstrings aside) is a second spelling that can drift from the first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trainer_run.storage import run_files

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "src" / "trainer_run", ROOT / "cli")
RUN_FILES = "src/trainer_run/storage/run_files.py"

OWNERS: dict[str, set[str]] = {
    **{value: {RUN_FILES} for name, value in vars(run_files).items()
       if name.isupper() and isinstance(value, str)},
    # inside a checkpoint iter_<N>: the checkpoint format's own names
    "state.json": {"src/trainer_run/storage/checkpoint.py"},
    "arrays.npz": {"src/trainer_run/storage/checkpoint.py"},
    "checksums.json": {"src/trainer_run/storage/checkpoint.py"},
    # a sweep folder's
    "multirun.yaml": {"cli/sweep_record.py"},
    "multirun.sig": {"cli/sweep_record.py"},
    "results.csv": {"src/trainer_run/results/report.py"},
    "results.md": {"src/trainer_run/results/report.py"},
    "results_by_seed.csv": {"src/trainer_run/results/report.py"},
}
# The config folder's primary config has the name Hydra gives the run's record of the config.
OWNERS["config.yaml"] = {RUN_FILES, "src/trainer_run/compose/options.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            found.add(id(node.body[0].value))
    return found


def spellings(sources=SOURCES, owners=OWNERS, root=ROOT) -> list[str]:
    """``path:line: 'name'`` for each string literal equal to a name of ``owners`` outside the
    name's owning modules (docstrings aside)."""
    found = []
    for source in sources:
        for path in sorted(Path(source).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(), str(path))
            docstrings = _docstrings(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and node.value in owners and id(node) not in docstrings
                        and relative not in owners[node.value]):
                    found.append(f"{relative}:{node.lineno}: {node.value!r}")
    return found


def test_names_of_a_run_are_the_run_files_constants():
    names = set(OWNERS)
    for name in (".hydra", "config.yaml", "hydra.yaml", "overrides.yaml", "config.sig", ".lock",
                 "checkpoints", "summary.json", "model.npz", "model_best.npz", "metrics.jsonl",
                 "metrics.csv", "plot.png", "tensorboard", "profile.json", "data.json",
                 "normalization.npz", "eval", "slurm.json", "trainer-run.json"):
        assert name in names, f"{name} is not a constant of trainer_run.storage.run_files"


def test_each_name_is_spelled_once():
    found = spellings()
    assert not found, ("file names spelled outside their owner; import the owner's constant "
                       "instead:\n" + "\n".join(found))


@pytest.mark.parametrize("code, caught", [
    ('X = "summary.json"\n', True),
    ('def f(run):\n    return run / ".hydra" / "config.yaml"\n', True),
    ('def f(run):\n    return f"{run}/model_best.npz"\n', False),  # a path, not the name
    ('def f(run):\n    return f"{run}" "/" "model.npz"\n', False),  # one joined literal
    ('def f(out):\n    return [out, "checkpoints"]\n', True),
    ('def f():\n    """Reads ``summary.json``."""\n', False),
    ('"""summary.json"""\n', False),
    ('MESSAGE = "see summary.json"\n', False),
])
def test_the_scan_finds_literals_not_docstrings(tmp_path, code, caught):
    (tmp_path / "probe.py").write_text(code)
    assert bool(spellings([tmp_path], root=tmp_path)) is caught
