"""Optimizer states as files: what a store's ``save_optimizer_states`` writes and its
``load_optimizer_states`` reads. The states are the applier's safe format (an ``.npz``
archive with a JSON manifest, read with ``allow_pickle=False``); MXNet's pickled states are
refused, never unpickled."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..storage import files

__all__ = ["read", "write"]

_ZIP_MAGIC = b"PK\x03\x04"  # how every .npz archive (a zip file) begins


def write(fname, blob: bytes) -> None:
    """Replaces ``fname`` with ``blob`` atomically (:func:`trainer_run.storage.files.write_atomic`: a
    refused write raises StorageError naming the file and leaves it as it was)."""
    files.write_atomic(Path(fname), blob)


def read(fname) -> bytes:
    """The bytes of ``fname``, once they are an ``.npz`` archive; a file that is not, a
    pickle for one, is refused with ConfigError before anything is read from it."""
    with open(fname, "rb") as fin:
        blob = fin.read()
    if not blob.startswith(_ZIP_MAGIC):
        raise ConfigError(f"{os.fspath(fname)!r} is not an optimizer-states file written by "
                          f"save_optimizer_states (an .npz archive); pickled states, "
                          f"MXNet's format, are refused because unpickling can run code")
    return blob
