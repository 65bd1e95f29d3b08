"""Checkpoints: training state as JSON plus arrays, written atomically, read without pickle.

A state is a tree of dicts, lists, scalars, strings, None and NumPy arrays. It is stored
in a directory ``<checkpoints>/iter_<iteration>/`` holding

- ``state.json``: a JSON object, the tree (the run's config included) with each array
  replaced by ``{"__array__": "<key>"}``, plus the top-level ``"format"`` (the layout's
  version, :data:`FORMAT`; the key is reserved);
- ``arrays.npz``: the arrays by key, a zip of ``.npy`` files (``numpy.load(...,
  allow_pickle=False)`` reads them);
- ``checksums.json``: the checksums of the two files above (:mod:`trainer_run.storage.checksums`:
  CRC-32 and size, computed while writing; SHA-256 in checkpoints written before), written last.

Writing goes to a temporary directory whose files are flushed and fsynced, then renamed
into place; the file ``<checkpoints>/latest`` naming the newest checkpoint is replaced
(atomically) last. A crash at any moment therefore leaves either the previous complete
checkpoint or the new one as ``latest``, never a partial one. Retention deletes the oldest
checkpoints (by iteration) beyond ``keep`` but never the one just written nor those the
caller protects (the run's best ones), so the only valid checkpoint is never deleted. The file
``<checkpoints>/best`` names the best checkpoint by the run's objective (:func:`mark_best`),
written the same way as ``latest``.

Loading verifies the checksums before parsing anything, then the schema: ``state.json``
must be a JSON object of a format this code reads, whose array references all name members
of ``arrays.npz`` (:mod:`trainer_run.storage.checkpoint_schema`), and ``arrays.npz`` a zip of
``.npy`` arrays loadable without pickle (:mod:`trainer_run.storage.npz`). A checkpoint without
``"format"`` is format 1: checkpoints written before the version was recorded have exactly
that layout. Nothing is ever unpickled: a truncated, corrupted, malformed or crafted
checkpoint is refused with a :class:`CheckpointError` naming the file.

This layer requires no top-level keys; a caller names those it needs with ``require``:
:data:`RUN_STATE` for the checkpoint of a trainer-run run (``config`` and ``choices`` from
the command line, ``trainer`` the Trainer's state), which whoever resumes a run passes.

:func:`find` falls back from a bad newest checkpoint to the previous valid one and reports
what it skipped, but stops at one written by a newer trainer-run. A failed write (full
disk, no permission) raises :class:`~trainer_run.errors.StorageError` naming the file after
removing its temporary directory; earlier checkpoints are untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable, Collection, Mapping

from trainer_run.storage import run_files

from ..errors import ConfigError, StorageError
from . import checkpoint_schema as schema
from . import checksums, files, npz, reading
from .checkpoint_schema import FORMAT, CheckpointError, NewerFormatError
from .states import flatten, unflatten

STATE = "state.json"
ARRAYS = "arrays.npz"
CHECKSUMS = "checksums.json"
LATEST = "latest"
BEST = "best"
PREFIX = "iter_"
RUN_STATE = {"config": dict, "choices": dict, "trainer": dict}  # a run checkpoint's top level


def name_of(iteration: int) -> str:
    """The name of the checkpoint of ``iteration`` (``iter_00000500``)."""
    return f"{PREFIX}{iteration:08d}"


def save(state: dict, directory: Path, iteration: int, keep: int | None = None,
         protect: Collection[str] = (), run: Path | None = None) -> Path:
    """Writes ``state`` as checkpoint ``iter_<iteration>`` under ``directory``; returns its path.
    With ``keep``, older checkpoints beyond the newest ``keep`` are deleted, except those named
    in ``protect``. With ``run`` (the run folder ``directory`` is in), a symbolic link from
    ``run`` down to the checkpoint, ``latest`` or ``best`` is refused
    (:class:`~trainer_run.storage.files.LinkInRun`) and nothing is written.

    Raises :class:`~trainer_run.errors.StorageError` naming the file the disk refused; the
    partial temporary directory is removed and earlier checkpoints stay as they were, as they
    do when writing fails otherwise (a TypeError for a value JSON cannot hold, which the
    writer of the state refuses first: :func:`~.states.unstorable`).
    ValueError if ``state`` has a top-level ``format`` key (reserved for the version).
    """
    if schema.FORMAT_KEY in state:
        raise ValueError(f"a checkpoint state's top-level key {schema.FORMAT_KEY!r} is reserved "
                         "for the format version")
    directory = Path(directory)
    name = name_of(iteration)
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    if run is not None:
        for path in (directory / name, directory / LATEST):
            files.check_no_links(path, run)
    try:
        if run is not None:
            files.make_folder(directory, run)
        directory.mkdir(parents=True, exist_ok=True)
        _write_files(state, tmp, directory / name)
        return _publish(tmp, directory, name, keep, {name, *protect}, run)
    except (OSError, StorageError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        failed = e if isinstance(e, StorageError) else files.storage_error(directory / name, e)
        previous, _ = _latest(directory)
        kept = f"; the previous checkpoint {previous} is intact" if previous else ""
        raise StorageError(f"{failed}{kept}") from None
    except BaseException:  # a state it cannot write (not JSON): no temporary folder is left
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_files(state: dict, tmp: Path, final: Path) -> None:
    """Writes the three files into ``tmp``; a refused write names the file under ``final``.
    The arrays are checksummed as they are written (:func:`trainer_run.storage.npz.write`)."""
    _remove(tmp)
    tmp.mkdir()
    arrays: dict = {}
    data = json.dumps({schema.FORMAT_KEY: FORMAT, **flatten(state, arrays)}).encode()
    sums = {}
    files.write_synced(tmp / ARRAYS, lambda f: sums.update({ARRAYS: npz.write(f, arrays)}),
                       shown_as=final / ARRAYS)
    files.write_synced(tmp / STATE, data, shown_as=final / STATE)
    sums[STATE] = checksums.of_bytes(data)
    files.write_synced(tmp / CHECKSUMS, json.dumps(checksums.record(sums)), shown_as=final / CHECKSUMS)
    files.fsync_dir(tmp)


def _publish(tmp: Path, directory: Path, name: str, keep: int | None, protect: set,
             run: Path | None = None) -> Path:
    """Renames the written ``tmp`` into place, then points ``latest`` at it (which also
    makes both renames durable)."""
    final = directory / name
    stale = directory / f".old-{name}-{os.getpid()}"
    _clean_leftovers(directory)
    if final.exists():
        os.replace(final, stale)
    os.replace(tmp, final)
    files.write_atomic(directory / LATEST, name + "\n", run=run)
    _remove(stale)
    if keep is not None:
        _prune(directory, keep, protect)
    return final


def mark_best(directory: Path, iteration: int, run: Path | None = None) -> None:
    """Points ``<directory>/best`` at the checkpoint of ``iteration`` (atomically; with
    ``run``, the run folder, never through a link)."""
    files.write_atomic(Path(directory) / BEST, name_of(iteration) + "\n", run=run)


def load(path: Path, require: Mapping[str, type] | None = None) -> dict:
    """Reads the checkpoint directory ``path`` back into a state tree after checking it as
    :func:`load_tree` does; raises :class:`CheckpointError` naming the bad file otherwise."""
    path = Path(path)
    tree = load_tree(path, require)
    try:
        arrays = npz.load(path / ARRAYS)
    except (OSError, ValueError) as e:
        raise schema.unreadable(path / ARRAYS, e) from None
    return unflatten(tree, arrays)


def load_tree(path: Path, require: Mapping[str, type] | None = None) -> dict:
    """The JSON part of checkpoint ``path`` (arrays left as ``{"__array__": key}``, without
    ``format``), after verifying its checksums and its schema: a JSON object of a format
    this code reads, whose array references all name arrays of ``arrays.npz`` (checked from
    their headers, no array data is read), holding each key of ``require`` with a value of
    its type (e.g. :data:`RUN_STATE`; nothing by default). Raises :class:`CheckpointError`
    naming the file and what is wrong, :class:`NewerFormatError` for a newer format."""
    path = Path(path)
    verify(path)
    tree = schema.read(path / STATE, path)
    try:
        arrays = npz.members(path / ARRAYS)
    except (OSError, ValueError) as e:
        raise schema.unreadable(path / ARRAYS, e) from None
    schema.check(path / STATE, tree, arrays, require or {})
    return tree


def verify(path: Path) -> None:
    """Checks that every file of checkpoint ``path`` exists and matches its checksum
    (:mod:`trainer_run.storage.checksums`: CRC-32 and size, or the SHA-256 older checkpoints hold)."""
    path = Path(path)
    if path.is_symlink():
        raise files.link_in_run(path)
    try:
        recorded = json.loads(reading.read_text(path / CHECKSUMS, reading.RECORD_BYTES))
        if not isinstance(recorded, dict) or not any(kind in recorded for kind in checksums.KINDS):
            raise ValueError(f"it holds no {' or '.join(checksums.KINDS)} checksums")
    except ConfigError:  # a link, a special file, an oversized one: planted, refused
        raise
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} is incomplete: {CHECKSUMS} is missing") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint file {path / CHECKSUMS} is corrupt ({e})") from None
    for name in (STATE, ARRAYS):
        if (path / name).is_symlink():
            raise files.link_in_run(path / name)
        if (path / name).exists() and not (path / name).is_file():
            raise files.not_regular(path / name)
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path} is incomplete: {name} is missing")
        if not checksums.matches(path / name, recorded):
            raise CheckpointError(f"checkpoint file {path / name} does not match its checksum "
                                  "(truncated or modified)")


def is_complete(path: Path) -> bool:
    """Whether ``path`` holds a checkpoint whose files all exist and match their checksums."""
    try:
        verify(path)
    except CheckpointError:
        return False
    return True


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint directories ``iter_<N>`` under ``directory``, oldest (smallest N) first;
    a directory whose suffix is not a number is not a checkpoint."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(_iteration(p.name), p.name, p) for p in directory.iterdir() if p.is_dir()]
    return [p for n, _, p in sorted(f for f in found if f[0] is not None)]


def is_checkpoint(path: Path) -> bool:
    """Whether ``path`` is a checkpoint directory: named ``iter_<N>``, or holding
    ``state.json`` or ``checksums.json`` (complete or not: :func:`verify` says)."""
    path = Path(path)
    return path.is_dir() and (_iteration(path.name) is not None or (path / STATE).exists()
                              or (path / CHECKSUMS).exists())


def iteration_of(path: Path) -> int | None:
    """The iteration in a checkpoint directory's name ``iter_<N>``, or None."""
    return _iteration(Path(path).name)


def _iteration(name: str) -> int | None:
    suffix = name[len(PREFIX):]
    if name.startswith(PREFIX) and suffix.isascii() and suffix.isdigit():
        return int(suffix)
    return None


def find(path: Path, report: Callable[[str], None] = lambda message: None,
         require: Mapping[str, type] | None = None,
         check: Callable[[dict, Mapping], None] | None = None) -> Path:
    """The checkpoint to resume from, given a run directory or a checkpoint directory.

    A checkpoint directory is used as given (and must be valid, as :func:`load_tree` checks
    it with ``require``). For a run directory (or its ``checkpoints`` folder) the one
    ``latest`` names is used when valid, else the newest valid one; a ``latest`` that names
    no checkpoint (empty, not text, dangling) and each bad checkpoint passed over are told
    to ``report`` with the reason. A checkpoint of a newer format is not passed over (that
    would resume older work and overwrite newer): its :class:`NewerFormatError` is raised.

    ``check(tree, arrays)`` judges the content, which this module does not know: it is given
    each candidate's tree (as :func:`load_tree` returns it) and its arrays' headers (key ->
    (shape, dtype), :func:`trainer_run.storage.npz.members`: no array data is read) and raises
    :class:`CheckpointError` saying what is wrong; such a candidate is refused or passed over
    as a damaged one is, ``checkpoint <path> is malformed: <what>``. The caller that knows the
    layout passes it (a run's: :func:`trainer_run.runs.checkpoint_tree.check`).
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"resume={path}: no such run or checkpoint directory")
    if path.name.startswith(PREFIX) or is_checkpoint(path):
        if path.parent.name == run_files.CHECKPOINTS:  # <run>/checkpoints/iter_<N>: no link below <run>
            files.check_no_links(path, path.parent.parent)
        _load_checked(path, require, check)
        return path
    files.check_no_links(path / run_files.CHECKPOINTS, path)
    directory = path / run_files.CHECKPOINTS if (path / run_files.CHECKPOINTS).is_dir() else path
    for candidate in _candidates(directory, report):
        try:
            _load_checked(candidate, require, check)
        except NewerFormatError:
            raise
        except CheckpointError as e:
            report(f"{e}; skipping it")
            continue
        return candidate
    raise ConfigError(f"resume={path}: no complete checkpoint found under {directory}")


def _load_checked(path: Path, require: Mapping[str, type] | None,
                  check: Callable[[dict, Mapping], None] | None) -> None:
    """:func:`load_tree`, then ``check`` on the tree and the arrays' headers (see :func:`find`)."""
    tree = load_tree(path, require)
    if check is None:
        return
    try:
        check(tree, npz.members(path / ARRAYS))
    except CheckpointError as e:
        raise CheckpointError(f"checkpoint {path} is malformed: {e}") from None


def _candidates(directory: Path, report: Callable[[str], None]) -> list[Path]:
    """The checkpoints under ``directory``, the one ``latest`` names first, then newest first."""
    candidates = list(reversed(list_checkpoints(directory)))
    latest, problem = _latest(directory)
    if latest is not None and directory / latest in candidates:
        candidates.remove(directory / latest)
        candidates.insert(0, directory / latest)
    elif latest is not None and leads_outside(latest):
        raise ConfigError(f"{directory / LATEST} names {latest!r}, outside {directory}: a run's "
                          "checkpoints are only those in its own folder; remove that file, or "
                          "name the checkpoint to resume")
    elif latest is not None:
        problem = f"{directory / LATEST} names {latest}, which is not a checkpoint there"
    if problem:
        report(f"{problem}; using the newest valid checkpoint")
    return candidates


def leads_outside(name: str) -> bool:
    """Whether the checkpoint name ``name`` (read from ``latest`` or ``best``) names anything
    but an entry of the checkpoints folder (a path, ``..``)."""
    return name in (".", "..") or "/" in name or "\0" in name


def _clean_leftovers(directory: Path) -> None:
    """Removes what killed writers left: partial ``.tmp-*`` checkpoints and ``.latest.tmp-*``
    files; a ``.old-<name>-<pid>`` copy moved aside for a re-save goes back to ``<name>``
    when that is missing (the kill came between the two renames), else it is removed."""
    mine = f"-{os.getpid()}"
    for leftover in directory.iterdir():
        if leftover.name.endswith(mine) and leftover.name.startswith(".tmp-"):
            continue  # this process's own write in progress
        if leftover.name.startswith((".tmp-", f".{LATEST}.tmp-", f".{BEST}.tmp-")):
            _remove(leftover)
        elif leftover.name.startswith(".old-"):
            original = directory / leftover.name[len(".old-"):].rsplit("-", 1)[0]
            if original.exists():
                _remove(leftover)
            else:
                os.replace(leftover, original)


def _remove(path: Path) -> None:
    """Removes the file or folder ``path`` (a link itself, never what it points to)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _latest(directory: Path) -> tuple[str | None, str | None]:
    """The checkpoint name the ``latest`` file holds, or None with what is wrong with it
    (None too when there is no such file)."""
    path = Path(directory) / LATEST
    try:
        name = reading.read_bytes(path, reading.MARKER_BYTES).decode().strip()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{path} cannot be read ({e.strerror or e})"
    except UnicodeDecodeError:
        return None, f"{path} does not hold a checkpoint name (it is not UTF-8 text)"
    return (name, None) if name else (None, f"{path} is empty")


def _prune(directory: Path, keep: int, protect: set) -> None:
    existing = list_checkpoints(directory)
    for old in existing[: max(0, len(existing) - keep)]:
        if old.name not in protect:
            shutil.rmtree(old, ignore_errors=True)
