"""Checksums of checkpoint files: computed while the bytes are written, checked by reading.

A file's checksum is its size in bytes and the CRC-32 of all its bytes (as ``zlib.crc32``,
eight hex digits). A writer keeps it as it writes (:class:`Running`), so a file written once
is never read back to be checksummed; a part whose CRC-32 the writer has computed anyway
(a zip member's) is added by :func:`combine`, without reading it again. Any change of up
to 32 consecutive bits, and any truncation or extension, is always detected; other
corruption escapes with probability 2^-32. These are checks against a damaged disk or an
interrupted copy, not against someone who rewrites the checksums.

Checkpoints written before recorded the SHA-256 of each file instead; :func:`matches`
checks either kind, as the ``checksums.json`` of a checkpoint names it (``{"crc32": ...,
"bytes": ...}`` or ``{"sha256": ...}``).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

from . import files

KINDS = ("crc32", "sha256")  # what a checksums.json may hold: this version's, the earlier one's


class Running:
    """The checksum of bytes added piece by piece, in order."""

    def __init__(self):
        self.crc32 = 0
        self.size = 0

    def add(self, data) -> None:
        """Adds the bytes of the buffer ``data``."""
        self.crc32 = zlib.crc32(data, self.crc32)
        self.size += memoryview(data).nbytes

    def add_summed(self, crc32: int, size: int) -> None:
        """Adds ``size`` bytes whose own CRC-32 is ``crc32``, without reading them again."""
        self.crc32 = combine(self.crc32, crc32, size)
        self.size += size

    def value(self) -> dict:
        """What :func:`of_bytes` says of the bytes added so far."""
        return {"crc32": f"{self.crc32:08x}", "bytes": self.size}


def combine(crc1: int, crc2: int, size2: int) -> int:
    """The CRC-32 of ``a + b`` from ``crc1`` of ``a`` and ``crc2`` of ``b`` (``size2`` bytes),
    as zlib's ``crc32_combine``: ``crc1`` times x^(8 size2) modulo the CRC polynomial, plus ``crc2``."""
    shift, k = 1 << 31, 3  # x^0, and x^(2^3) = x^8: one byte
    while size2:
        if size2 & 1:
            shift = _multiply(_X_POWERS[k & 31], shift)
        size2 >>= 1
        k += 1
    return _multiply(shift, crc1) ^ crc2


def _multiply(a: int, b: int) -> int:
    """a times b modulo the CRC-32 polynomial, in zlib's reflected bit order."""
    product, bit = 0, 1 << 31
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLYNOMIAL if b & 1 else b >> 1
    return product


_POLYNOMIAL = 0xEDB88320
_X_POWERS = [1 << 30]  # x^(2^k) modulo the polynomial, k = 0..31
for _ in range(31):
    _X_POWERS.append(_multiply(_X_POWERS[-1], _X_POWERS[-1]))


def of_bytes(data: bytes) -> dict:
    """The checksum of ``data``: ``{"crc32": "<8 hex digits>", "bytes": <size>}``."""
    return {"crc32": f"{zlib.crc32(data):08x}", "bytes": len(data)}


def record(checksums: dict) -> dict:
    """The content of ``checksums.json`` for ``file name -> checksum``."""
    return {kind: {name: c[kind] for name, c in checksums.items()} for kind in ("crc32", "bytes")}


def matches(path: Path, recorded: dict) -> bool:
    """Whether file ``path`` matches what ``recorded`` (the content of a ``checksums.json``,
    either kind) holds for its name; False when nothing is recorded for it."""
    name = Path(path).name
    if "crc32" in recorded:
        return (os.path.getsize(path) == _recorded(recorded, "bytes", name)
                and _digest(path, "crc32") == _recorded(recorded, "crc32", name))
    return _digest(path, "sha256") == _recorded(recorded, "sha256", name)


def _recorded(recorded: dict, kind: str, name: str):
    table = recorded.get(kind)
    return table.get(name) if isinstance(table, dict) else None


def _digest(path: Path, kind: str) -> str:
    """The file's digest of ``kind``, computed once per version of the file in this process
    (a resume verifies the same checkpoint while finding, checking and loading it)."""
    st = os.stat(path)
    version = (kind, os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if version not in _DIGESTS:
        _DIGESTS[version] = _read_digest(path, kind)
    return _DIGESTS[version]


_DIGESTS: dict[tuple, str] = {}


def _read_digest(path: Path, kind: str) -> str:
    crc, sha = 0, hashlib.sha256()
    with os.fdopen(files.open_regular(path, os.O_RDONLY), "rb") as f:  # no link, FIFO, device
        for block in iter(lambda: f.read(1 << 20), b""):
            if kind == "crc32":
                crc = zlib.crc32(block, crc)
            else:
                sha.update(block)
    return f"{crc:08x}" if kind == "crc32" else sha.hexdigest()
