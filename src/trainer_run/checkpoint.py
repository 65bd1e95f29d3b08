"""Checkpoints: training state as JSON plus arrays, written atomically, read without pickle.

A state is a tree of dicts, lists, scalars, strings, None and NumPy arrays. It is stored
in a directory ``<checkpoints>/iter_<iteration>/`` holding

- ``state.json``: the tree (the run's config included), each array replaced by
  ``{"__array__": "<key>"}``;
- ``arrays.npz``: the arrays by key (``numpy.load(..., allow_pickle=False)`` reads them);
- ``checksums.json``: the SHA-256 of the two files above, written last.

Writing goes to a temporary directory whose files are flushed and fsynced, then renamed
into place; the file ``<checkpoints>/latest`` naming the newest checkpoint is replaced
(atomically) last. A crash at any moment therefore leaves either the previous complete
checkpoint or the new one as ``latest``, never a partial one. Retention deletes the oldest
checkpoints beyond ``keep`` but never the one just written, so the only valid checkpoint
is never deleted.

Loading verifies the checksums before parsing anything and never unpickles: a truncated,
corrupted or crafted checkpoint is refused with a :class:`CheckpointError` naming the
file. :func:`find` falls back from a bad newest checkpoint to the previous valid one and
reports what it skipped. A failed write (full disk, no permission) raises
:class:`~trainer_run.errors.StorageError` after removing its temporary directory; earlier
checkpoints are untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable

import numpy

from .errors import ConfigError, StorageError

STATE = "state.json"
ARRAYS = "arrays.npz"
CHECKSUMS = "checksums.json"
LATEST = "latest"
PREFIX = "iter_"


class CheckpointError(ConfigError):
    """A checkpoint is missing, incomplete, corrupt or not a checkpoint at all."""


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
    """Writes ``state`` as checkpoint ``iter_<iteration>`` under ``directory``; returns its path.

    Raises :class:`~trainer_run.errors.StorageError` when the disk refuses the write; the
    partial temporary directory is removed and earlier checkpoints stay as they were.
    """
    directory = Path(directory)
    name = f"{PREFIX}{iteration:08d}"
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_files(state, tmp)
        return _publish(tmp, directory, name, keep)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        previous = _latest_name(directory)
        kept = f"; the previous checkpoint {previous} is intact" if previous else ""
        raise StorageError(f"cannot write checkpoint {directory / name}: "
                           f"{e.strerror or e}{kept}") from None


def _write_files(state: dict, tmp: Path) -> None:
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    arrays: dict = {}
    tree = flatten(state, arrays)
    digests = {}
    with open(tmp / ARRAYS, "wb") as f:
        numpy.savez(f, **arrays)
        _sync(f)
    digests[ARRAYS] = _hash_file(tmp / ARRAYS)
    data = json.dumps(tree).encode()
    with open(tmp / STATE, "wb") as f:
        f.write(data)
        _sync(f)
    digests[STATE] = hashlib.sha256(data).hexdigest()
    with open(tmp / CHECKSUMS, "w") as f:
        json.dump({"sha256": digests}, f)
        _sync(f)
    _fsync_dir(tmp)


def _publish(tmp: Path, directory: Path, name: str, keep: int | None) -> Path:
    """Renames the written ``tmp`` into place, then points ``latest`` at it."""
    final = directory / name
    stale = directory / f".old-{name}-{os.getpid()}"
    _clean_leftovers(directory)
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
    """Reads the checkpoint directory ``path`` back into a state tree, after verifying its
    checksums; raises :class:`CheckpointError` naming the bad file otherwise."""
    path = Path(path)
    tree = load_tree(path)
    try:
        with numpy.load(path / ARRAYS, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        return unflatten(tree, arrays)
    except (OSError, ValueError, KeyError, EOFError) as e:
        raise CheckpointError(f"checkpoint file {path / ARRAYS} cannot be read ({e})") from None


def load_tree(path: Path) -> dict:
    """The JSON part of a verified checkpoint (arrays left as ``{"__array__": key}``)."""
    path = Path(path)
    verify(path)
    try:
        return json.loads((path / STATE).read_bytes())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint file {path / STATE} cannot be read ({e})") from None


def verify(path: Path) -> None:
    """Checks that every file of checkpoint ``path`` exists and matches its checksum."""
    path = Path(path)
    try:
        digests = json.loads((path / CHECKSUMS).read_text())["sha256"]
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} is incomplete: {CHECKSUMS} is missing") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"checkpoint file {path / CHECKSUMS} is corrupt ({e})") from None
    for name in (STATE, ARRAYS):
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path} is incomplete: {name} is missing")
        if not isinstance(digests, dict) or _sha256(path / name) != digests.get(name):
            raise CheckpointError(f"checkpoint file {path / name} does not match its checksum "
                                  "(truncated or modified)")


def load_params(model, path: Path) -> None:
    """Loads saved parameters into ``model`` (anything with ``params()``) in place: from a
    ``model.npz`` written at the end of a run, or from the main model of a checkpoint
    directory. Raises :class:`CheckpointError` for an unreadable file and ValueError /
    KeyError naming the first parameter that is missing or has another shape."""
    from .params import copy_params

    path = Path(path)
    if path.is_dir():
        arrays = load(path)["trainer"]["updater"]["models"]["main"]
    else:
        try:
            with numpy.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError, EOFError) as e:
            raise CheckpointError(f"model file {path} cannot be read ({e})") from None
    copy_params(model.params(), arrays)


def is_complete(path: Path) -> bool:
    """Whether ``path`` holds a checkpoint whose files all exist and match their checksums."""
    try:
        verify(path)
    except CheckpointError:
        return False
    return True


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint directories under ``directory``, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def find(path: Path, report: Callable[[str], None] = lambda message: None) -> Path:
    """The checkpoint to resume from, given a run directory or a checkpoint directory.

    A checkpoint directory is used as given (and must be valid). For a run directory (or
    its ``checkpoints`` folder) the one ``latest`` names is used when valid, else the newest
    valid one; each bad checkpoint passed over is told to ``report`` with the reason.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"resume={path}: no such run or checkpoint directory")
    if path.name.startswith(PREFIX) or (path / STATE).exists() or (path / CHECKSUMS).exists():
        verify(path)
        return path
    directory = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    candidates = list(reversed(list_checkpoints(directory)))
    latest = _latest_name(directory)
    if latest and (directory / latest) in candidates:
        candidates.remove(directory / latest)
        candidates.insert(0, directory / latest)
    for candidate in candidates:
        try:
            verify(candidate)
        except CheckpointError as e:
            report(f"{e}; skipping it")
            continue
        return candidate
    raise ConfigError(f"resume={path}: no complete checkpoint found under {directory}")


def run_dir_of(checkpoint: Path) -> Path:
    """The run directory a checkpoint belongs to (``<run>/checkpoints/iter_N``)."""
    return Path(checkpoint).resolve().parent.parent


def _clean_leftovers(directory: Path) -> None:
    """Removes what killed writers left: partial ``.tmp-*`` checkpoints and ``.latest.tmp-*``
    files; a ``.old-<name>-<pid>`` copy moved aside for a re-save goes back to ``<name>``
    when that is missing (the kill came between the two renames), else it is removed."""
    mine = f"-{os.getpid()}"
    for leftover in directory.iterdir():
        if leftover.name.endswith(mine) and leftover.name.startswith(".tmp-"):
            continue  # this process's own write in progress
        if leftover.name.startswith((".tmp-", f".{LATEST}.tmp-")):
            _remove(leftover)
        elif leftover.name.startswith(".old-"):
            original = directory / leftover.name[len(".old-"):].rsplit("-", 1)[0]
            if original.exists():
                _remove(leftover)
            else:
                os.replace(leftover, original)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _latest_name(directory: Path) -> str | None:
    try:
        return (Path(directory) / LATEST).read_text().strip() or None
    except OSError:
        return None


def _sha256(path: Path) -> str:
    """The file's SHA-256, computed once per version of the file in this process (a resume
    verifies the same checkpoint while finding, checking and loading it)."""
    st = os.stat(path)
    version = (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if version not in _DIGESTS:
        _DIGESTS[version] = _hash_file(path)
    return _DIGESTS[version]


_DIGESTS: dict[tuple, str] = {}


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
