"""Reading a run's files: regular files only, never through a link, each of a bounded size.

A run folder may come from anyone, so a file read from it may be a link (to a user's file,
to ``/dev/zero``), a FIFO or a device, or a sparse file of terabytes. Every file trainer-run
reads from a run is therefore opened with ``O_NOFOLLOW`` and without waiting on a FIFO,
refused unless it is a regular file, and refused when it is larger than the limit of its
kind below (generous for any run this tool writes, finite for any other): one
:class:`~trainer_run.errors.ConfigError` line naming the file and the limit, before
anything is read. A caller that names the ``run`` folder has the folders between it and the
file checked for links as well (:func:`trainer_run.storage.files.check_no_links`).

The limits are the ``*_BYTES`` constants below, one per kind of file; an ``.npz`` archive has
none of its own, its members' declared sizes are checked (:mod:`trainer_run.storage.npz`).
A YAML file of a run is read by :func:`trainer_run.storage.yaml_files.read_run`, which also
refuses aliases.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from ..errors import ConfigError
from . import files

KiB = 1 << 10
MiB = 1 << 20

MARKER_BYTES = 4 * KiB
"""``checkpoints/latest`` and ``best`` (a checkpoint's name), ``.hydra/config.sig``, ``multirun.sig``."""
CONFIG_BYTES = 16 * MiB
"""A run's YAML records: ``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``."""
RECORD_BYTES = 64 * MiB
"""A JSON record: ``summary.json``, ``data.json`` (class names included), ``checksums.json``,
``eval/*.json``, ``.hydra/slurm.json``."""
STATE_BYTES = 1024 * MiB
"""A checkpoint's ``state.json``: the config, the counters and the log rows so far."""
METRICS_BYTES = 1024 * MiB
"""``metrics.jsonl``: one row per log interval of the whole run."""


class TooLarge(ConfigError):
    """A run's file is larger than the limit of its kind."""


def read_bytes(path: Path, limit: int, run: Path | None = None) -> bytes:
    """The bytes of the regular file ``path`` (not a link; with ``run``, no folder between
    ``run`` and it a link either) when it holds at most ``limit`` bytes; ConfigError naming it
    otherwise (:class:`TooLarge` for its size), OSError as opening it raises it."""
    with open_file(path, limit, run) as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise too_large(path, len(data), limit)
    return data


def read_text(path: Path, limit: int, run: Path | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8 (UnicodeDecodeError, a ValueError, if it is not)."""
    return read_bytes(path, limit, run).decode("utf-8")


def open_file(path: Path, limit: int | None = None, run: Path | None = None) -> BinaryIO:
    """The regular file ``path`` opened for binary reading, checked as :func:`read_bytes`
    checks it (no size limit with ``limit`` None: an archive, whose members are checked)."""
    if run is not None:
        files.check_no_links(path, run)
    fd = files.open_regular(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    if limit is not None and size > limit:
        os.close(fd)
        raise too_large(path, size, limit)
    return os.fdopen(fd, "rb")


def too_large(path: Path, size: int, limit: int) -> TooLarge:
    return TooLarge(f"{path} holds {size} bytes, more than the {_shown(limit)} a file of its kind "
                    "in a run may hold; it is not a file trainer-run wrote: check that the run "
                    "folder is the one meant")


def _shown(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB else f"{limit // KiB} KiB"
