"""A zip archive of uncompressed members, written in one sequential pass.

:class:`ZipArchive` writes each member's local header (its CRC-32 and size already known,
so nothing is patched afterwards) and then its data straight from the caller's buffers,
without copying them; :meth:`~ZipArchive.close` writes the central directory. Every
record uses the ZIP64 extensions (as ``numpy.savez`` does for its members), so members
and archives of any size take one code path; :mod:`zipfile` and ``numpy.load`` read the
result. The archive keeps the checksum of every byte it wrote
(:class:`~trainer_run.storage.checksums.Running`), each member's data read once for
both its CRC-32 and the archive's.
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO, Sequence

from .checksums import Running

_VERSION = 45  # ZIP64 (APPNOTE 4.5)
_UTF8 = 0x800  # member names are UTF-8
_DATE = (1 << 5) | 1  # 1980-01-01: fixed, so the bytes depend on the arrays alone
_FULL32 = 0xFFFFFFFF
_FULL16 = 0xFFFF


class ZipArchive:
    """Writes members to the binary stream ``file``; :meth:`close` finishes the archive
    (the stream itself stays open)."""

    def __init__(self, file: BinaryIO):
        self.file = file
        self.checksum = Running()
        self._directory: list[bytes] = []

    def add(self, name: str, parts: Sequence) -> None:
        """Adds the member ``name`` holding the bytes of ``parts`` (buffers) one after another."""
        views = [memoryview(p).cast("B") for p in parts]
        crc = 0
        for view in views:
            crc = zlib.crc32(view, crc)
        size = sum(view.nbytes for view in views)
        encoded = name.encode()
        offset = self.checksum.size
        self._write(struct.pack("<IHHHHHIIIHH", 0x04034B50, _VERSION, _UTF8, 0, 0, _DATE, crc,
                                _FULL32, _FULL32, len(encoded), 20)
                    + encoded + struct.pack("<HHQQ", 1, 16, size, size))
        for view in views:
            self.file.write(view)
        self.checksum.add_summed(crc, size)
        self._directory.append(
            struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, _VERSION, _VERSION, _UTF8, 0, 0, _DATE,
                        crc, _FULL32, _FULL32, len(encoded), 28, 0, 0, 0, 0, _FULL32)
            + encoded + struct.pack("<HHQQQ", 1, 24, size, size, offset))

    def close(self) -> None:
        """Writes the central directory and the end records (only the classic end record for
        an archive without members, which ``numpy.load`` recognises as an empty zip only so)."""
        if not self._directory:
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0, 0, 0, 0, 0))
            return
        start = self.checksum.size
        directory = b"".join(self._directory)
        self._write(directory)
        end64 = self.checksum.size
        count = len(self._directory)
        self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, _VERSION, _VERSION, 0, 0, count, count,
                                len(directory), start)
                    + struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
                    + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, _FULL16, _FULL16, _FULL32, _FULL32, 0))

    def _write(self, data: bytes) -> None:
        self.file.write(data)
        self.checksum.add(data)
