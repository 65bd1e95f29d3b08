"""Checkpoints: training state as JSON plus arrays, written atomically, read without pickle.

A state is a tree of dicts, lists, scalars, strings, None and NumPy arrays. It is stored
in a directory ``<checkpoints>/iter_<iteration>/`` holding

- ``state.json``: the tree, each array replaced by ``{"__array__": "<key>"}``;
- ``arrays.npz``: the arrays by key (``numpy.load(..., allow_pickle=False)`` reads them).

Writing goes to a temporary directory that is fsynced and then renamed into place; the
file ``<checkpoints>/latest`` naming the newest checkpoint is replaced (atomically) last.
A crash at any moment therefore leaves either the previous complete checkpoint or the new
one as ``latest``, never a partial one. Retention deletes the oldest checkpoints beyond
``keep`` but never the one ``latest`` names.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy

from .errors import ConfigError

STATE = "state.json"
ARRAYS = "arrays.npz"
LATEST = "latest"
PREFIX = "iter_"


def flatten(tree, arrays: dict, path: str = ""):
    """The JSON-able tree with arrays moved into ``arrays`` under their path."""
    if isinstance(tree, dict):
        return {str(k): flatten(v, arrays, f"{path}/{k}") for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [flatten(v, arrays, f"{path}/{i}") for i, v in enumerate(tree)]
    if isinstance(tree, numpy.ndarray):
        key = path.lstrip("/")
        arrays[key] = tree
        return {"__array__": key}
    if isinstance(tree, numpy.generic):
        return tree.item()
    return tree


def unflatten(tree, arrays):
    """Inverse of :func:`flatten`."""
    if isinstance(tree, dict):
        if set(tree) == {"__array__"}:
            return arrays[tree["__array__"]]
        return {k: unflatten(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [unflatten(v, arrays) for v in tree]
    return tree


def save(state: dict, directory: Path, iteration: int, keep: int | None = None) -> Path:
    """Writes ``state`` as checkpoint ``iter_<iteration>`` under ``directory``; returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{PREFIX}{iteration:08d}"
    final = directory / name
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    arrays: dict = {}
    tree = flatten(state, arrays)
    with open(tmp / ARRAYS, "wb") as f:
        numpy.savez(f, **arrays)
        _sync(f)
    with open(tmp / STATE, "w") as f:
        json.dump(tree, f)
        _sync(f)
    _fsync_dir(tmp)
    stale = directory / f".old-{name}-{os.getpid()}"
    if final.exists():
        os.replace(final, stale)
    os.replace(tmp, final)
    _write_atomic(directory / LATEST, name + "\n")
    _fsync_dir(directory)
    shutil.rmtree(stale, ignore_errors=True)
    if keep is not None:
        _prune(directory, keep, protect=name)
    return final


def load(path: Path) -> dict:
    """Reads the checkpoint directory ``path`` back into a state tree."""
    path = Path(path)
    try:
        with open(path / STATE) as f:
            tree = json.load(f)
        with numpy.load(path / ARRAYS, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        return unflatten(tree, arrays)
    except (OSError, ValueError, KeyError, EOFError) as e:
        raise ConfigError(f"checkpoint {path} is unreadable ({e}); resume from another one") from None


def load_tree(path: Path) -> dict:
    """The JSON part of a checkpoint (arrays left as ``{"__array__": key}`` references)."""
    try:
        with open(Path(path) / STATE) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(f"checkpoint {path} is unreadable ({e}); resume from another one") from None


def is_complete(path: Path) -> bool:
    """Whether ``path`` holds a checkpoint whose files both exist and parse."""
    try:
        load(path)
    except ConfigError:
        return False
    return True


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint directories under ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def find(path: Path) -> Path:
    """The checkpoint to resume from, given a run directory or a checkpoint directory.

    A checkpoint directory is used as given. For a run directory (or its ``checkpoints``
    folder) the one ``latest`` names is used when complete, else the newest complete one.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"resume={path}: no such run or checkpoint directory")
    if (path / STATE).exists():
        if not is_complete(path):
            raise ConfigError(f"resume={path}: the checkpoint is incomplete or corrupt")
        return path
    directory = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    latest = directory / LATEST
    if latest.exists():
        candidate = directory / latest.read_text().strip()
        if is_complete(candidate):
            return candidate
    for candidate in reversed(list_checkpoints(directory)):
        if is_complete(candidate):
            return candidate
    raise ConfigError(f"resume={path}: no complete checkpoint found under {directory}")


def run_dir_of(checkpoint: Path) -> Path:
    """The run directory a checkpoint belongs to (``<run>/checkpoints/iter_N``)."""
    return Path(checkpoint).resolve().parent.parent


def _prune(directory: Path, keep: int, protect: str) -> None:
    existing = list_checkpoints(directory)
    for old in existing[: max(0, len(existing) - keep)]:
        if old.name != protect:
            shutil.rmtree(old, ignore_errors=True)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        _sync(f)
    os.replace(tmp, path)


def _sync(f) -> None:
    f.flush()
    os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
