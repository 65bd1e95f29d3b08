"""A run's ``summary.json``: how the run ended and what it measured, written when it ends (by
:class:`~trainer_run.training.extensions.Summary`, or by a sweep for a job that failed) and read
by everything that looks at a finished run.

It is read as data from a folder anyone may have written: a link, a device or a file larger
than a summary may be is refused (:mod:`trainer_run.storage.reading`, a ConfigError naming the
file); NaN and infinities are written as ``null`` (:mod:`trainer_run.storage.strict_json`).
"""

from __future__ import annotations

import json
from pathlib import Path

from trainer_run.errors import ConfigError
from trainer_run.storage import files, reading, strict_json
from trainer_run.storage.run_files import SUMMARY


class Unreadable(ConfigError):
    """A summary that cannot be read as one: damaged, not JSON, not an object."""


def write(run: Path, summary: dict) -> None:
    """Writes ``summary`` as ``<run>/summary.json``, whole or not at all."""
    files.write_atomic(Path(run) / SUMMARY, strict_json.dumps(summary, indent=2), run=run)


def read(run: Path) -> dict:
    """The summary of ``run``: empty when it has none (killed, or still running); a
    :class:`~trainer_run.errors.ConfigError` naming the file when it cannot be read, is not
    JSON or not an object, or is refused."""
    path = Path(run) / SUMMARY
    if not (path.exists() or path.is_symlink()):
        return {}
    try:
        summary = json.loads(reading.read_text(path, reading.RECORD_BYTES, run))
    except OSError as e:
        raise Unreadable(f"cannot read {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Unreadable(f"{path} is not valid JSON: {e}") from None
    except RecursionError:
        raise Unreadable(f"{path} is nested too deeply to be a run summary") from None
    if not isinstance(summary, dict):
        raise Unreadable(f"{path} is not a run summary (expected a JSON object)")
    return summary


def recorded(run: Path) -> dict:
    """The summary of ``run``, or empty when it has none it can read (killed while writing
    it, or damaged); a file :mod:`~trainer_run.storage.reading` refuses (a link, a device,
    one too large) still raises its ConfigError."""
    try:
        return read(run)
    except Unreadable:
        return {}
