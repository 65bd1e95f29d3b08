"""Helpers of the tests of refused writes (a full disk) and of strict JSON, shared by the tests
of the modules that write a run's files (storage/files.py, the Summary and LogReport
extensions, the kvstore's state files, storage/strict_json.py)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

FULL = "No space left on device"


def disk_full_for(monkeypatch, name: str) -> None:
    """Makes the disk refuse (ENOSPC at fsync) every file whose name contains ``name``."""
    real = os.fsync

    def fsync(fd):
        if name in os.path.basename(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.ENOSPC, FULL)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in Path(directory).rglob("*") if ".tmp" in p.name)


def strict_loads(text: str):
    """Parses ``text`` as strict JSON: NaN, Infinity and -Infinity are refused."""
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)
