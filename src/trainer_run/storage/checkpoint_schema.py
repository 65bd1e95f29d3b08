"""The schema of a checkpoint's ``state.json`` and the errors a checkpoint can be refused with.

``state.json`` is a JSON object: the state tree with each array replaced by
``{"__array__": "<key>"}`` naming a member of ``arrays.npz``, plus the top-level
``"format"``, the version of the layout (:data:`FORMAT`). A ``state.json`` without
``"format"`` is format 1, the layout written before the version was recorded. A format
newer than :data:`FORMAT` is refused with :class:`NewerFormatError` asking for an upgrade;
any other violation with :class:`CheckpointError` naming ``state.json`` and what is wrong.
Which top-level keys a state must hold is the caller's to say (``require``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from ..errors import ConfigError
from . import reading

FORMAT = 1  # the newest layout this code writes and reads
FORMAT_KEY = "format"

_JSON_KINDS = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
               int: "a number", float: "a number", type(None): "null"}


class CheckpointError(ConfigError):
    """A checkpoint is missing, incomplete, corrupt, malformed or not a checkpoint at all."""


class NewerFormatError(CheckpointError):
    """A checkpoint was written by a newer trainer-run in a format this one cannot read."""


def read(state_file: Path, checkpoint: Path) -> dict:
    """The tree in ``state_file`` (of checkpoint directory ``checkpoint``) without its
    ``format``, after checking that it is a JSON object of a format this code reads."""
    try:
        tree = json.loads(reading.read_bytes(Path(state_file), reading.STATE_BYTES))
    except (OSError, ValueError, RecursionError) as e:
        raise unreadable(state_file, e) from None
    if not isinstance(tree, dict):
        raise _malformed(state_file, f"it holds {_kind(tree)}, not an object")
    version = tree.pop(FORMAT_KEY, 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _malformed(state_file, f"its {FORMAT_KEY!r} is {version!r}, not a positive integer")
    if version > FORMAT:
        raise NewerFormatError(f"checkpoint {checkpoint} was written by a newer trainer-run (format "
                               f"{version}; this one reads up to {FORMAT}): upgrade trainer-run "
                               "to resume it")
    return tree


def check(state_file: Path, tree: dict, arrays: Mapping, require: Mapping[str, type]) -> None:
    """Checks that every array reference in ``tree`` names a key of ``arrays`` (the
    members of ``arrays.npz``) and that ``tree`` holds each key of ``require`` with a value
    of its type; raises :class:`CheckpointError` naming ``state_file`` otherwise."""
    _check_references(state_file, tree, arrays)
    for key, kind in require.items():
        if key not in tree:
            raise _malformed(state_file, f"it lacks {key!r}")
        if not isinstance(tree[key], kind):
            raise _malformed(state_file, f"its {key!r} is {_kind(tree[key])}, not "
                                         f"{_JSON_KINDS.get(kind, kind.__name__)}")


def unreadable(file: Path, error: Exception) -> CheckpointError:
    """The error for a checkpoint file that cannot be parsed at all."""
    return CheckpointError(f"checkpoint file {file} cannot be read ({error})")


def _check_references(state_file: Path, tree: dict, arrays: Mapping) -> None:
    pending = [("", tree)]
    while pending:  # no recursion: a deeply nested crafted tree cannot overflow the stack
        where, node = pending.pop()
        if isinstance(node, dict) and set(node) == {"__array__"}:
            key = node["__array__"]
            if not isinstance(key, str) or key not in arrays:
                raise _malformed(state_file, f"{where or '/'} refers to array {key!r}, which "
                                             "arrays.npz does not hold")
        elif isinstance(node, dict):
            pending.extend((f"{where}/{k}", v) for k, v in node.items())
        elif isinstance(node, list):
            pending.extend((f"{where}/{i}", v) for i, v in enumerate(node))


def _kind(value) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


def _malformed(state_file: Path, problem: str) -> CheckpointError:
    return CheckpointError(f"checkpoint file {state_file} is malformed: {problem}")
