"""trainer_run.storage.ziparchive: an archive written by ZipArchive is read back by Python's
zipfile and numpy.load with the same members and bytes, each member stored uncompressed with its
CRC-32 and size recorded right (in ZIP64 records, parsed here by hand from APPNOTE), and the
archive's running checksum is that of the bytes written."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import numpy
import pytest

from trainer_run.storage.ziparchive import ZipArchive


def npy(array: numpy.ndarray) -> bytes:
    buffer = io.BytesIO()
    numpy.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def archive_of(members: dict) -> tuple[bytes, ZipArchive]:
    """The bytes of an archive of ``members`` (name -> list of buffers), and its writer."""
    buffer = io.BytesIO()
    archive = ZipArchive(buffer)
    for name, parts in members.items():
        archive.add(name, parts)
    archive.close()
    assert not buffer.closed
    return buffer.getvalue(), archive


MEMBERS = {"plain.bin": [b"hello ", bytearray(b"world")],
           "floats.bin": [numpy.arange(7, dtype=numpy.float64), memoryview(b"\x00\xff")],
           "empty": [],
           "empty parts": [b"", numpy.zeros(0, numpy.int32)],
           "données/é.txt": ["é".encode()],
           "big.bin": [numpy.random.default_rng(0).integers(0, 256, 300_000, numpy.uint8)]}


def joined(parts) -> bytes:
    return b"".join(bytes(memoryview(p).cast("B")) for p in parts)


def test_zipfile_reads_every_member_back_with_its_bytes():
    data, _ = archive_of(MEMBERS)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None  # every member's CRC-32 checked
        assert archive.namelist() == list(MEMBERS)
        for info, (name, parts) in zip(archive.infolist(), MEMBERS.items()):
            expected = joined(parts)
            assert archive.read(name) == expected
            assert info.compress_type == zipfile.ZIP_STORED
            assert info.CRC == zlib.crc32(expected)
            assert info.file_size == info.compress_size == len(expected)
            assert info.flag_bits & 0x800  # the name is UTF-8
            assert info.date_time == (1980, 1, 1, 0, 0, 0)


def test_the_same_members_as_zipfile_writes_them():
    """What zipfile holds after writing the members itself, ours holds too."""
    theirs = io.BytesIO()
    with zipfile.ZipFile(theirs, "w", zipfile.ZIP_STORED) as archive:
        for name, parts in MEMBERS.items():
            archive.writestr(name, joined(parts))
    ours, _ = archive_of(MEMBERS)
    with zipfile.ZipFile(theirs) as a, zipfile.ZipFile(io.BytesIO(ours)) as b:
        assert [(i.filename, i.CRC, i.file_size) for i in a.infolist()] == \
            [(i.filename, i.CRC, i.file_size) for i in b.infolist()]
        assert all(a.read(name) == b.read(name) for name in a.namelist())


def test_numpy_load_reads_the_arrays_of_an_npz_written_so():
    arrays = {"w": numpy.arange(12, dtype=numpy.float32).reshape(3, 4), "b": numpy.array([True, False]),
              "s": numpy.array(3.5), "t": numpy.array(["ab", "c"])}
    data, _ = archive_of({f"{k}.npy": [npy(v)] for k, v in arrays.items()})
    with numpy.load(io.BytesIO(data), allow_pickle=False) as loaded:
        assert loaded.files == list(arrays)
        for key, value in arrays.items():
            assert loaded[key].dtype == value.dtype and loaded[key].shape == value.shape
            assert loaded[key].tobytes() == value.tobytes()


def test_the_running_checksum_is_that_of_every_byte_written():
    data, archive = archive_of(MEMBERS)
    assert archive.checksum.size == len(data)
    assert archive.checksum.crc32 == zlib.crc32(data)
    assert archive.checksum.value() == {"crc32": f"{zlib.crc32(data):08x}", "bytes": len(data)}


def test_an_archive_without_members_is_the_classic_end_record_alone():
    data, archive = archive_of({})
    assert data == b"PK\x05\x06" + bytes(18)
    assert archive.checksum.value() == {"crc32": f"{zlib.crc32(data):08x}", "bytes": 22}
    with zipfile.ZipFile(io.BytesIO(data)) as read:
        assert read.namelist() == []
    with numpy.load(io.BytesIO(data), allow_pickle=False) as loaded:
        assert loaded.files == []


def test_the_bytes_depend_on_the_members_alone():
    assert archive_of(MEMBERS)[0] == archive_of(MEMBERS)[0]
    assert archive_of({"a": [b"x"]})[0] != archive_of({"a": [b"y"]})[0]


def test_the_records_are_zip64_as_appnote_lays_them_out():
    """The local header, the central directory entry, the ZIP64 end records and the classic
    end record of a two-member archive, field by field (APPNOTE.TXT 4.3.7, 4.3.12, 4.3.14-16,
    4.5.3)."""
    first, second = b"abc", b"\x01" * 10
    data, _ = archive_of({"a": [first], "bc": [second]})
    local = struct.unpack_from("<IHHHHHIIIHH", data, 0)
    assert local == (0x04034B50, 45, 0x800, 0, 0, 33, zlib.crc32(first), 0xFFFFFFFF, 0xFFFFFFFF, 1, 20)
    assert data[30:31] == b"a"
    assert struct.unpack_from("<HHQQ", data, 31) == (1, 16, 3, 3)
    assert data[51:54] == first
    second_at = 54
    assert struct.unpack_from("<I", data, second_at)[0] == 0x04034B50
    directory_at = second_at + 30 + 2 + 20 + len(second)
    entry = struct.unpack_from("<IHHHHHHIIIHHHHHII", data, directory_at)
    assert entry == (0x02014B50, 45, 45, 0x800, 0, 0, 33, zlib.crc32(first), 0xFFFFFFFF,
                     0xFFFFFFFF, 1, 28, 0, 0, 0, 0, 0xFFFFFFFF)
    assert struct.unpack_from("<HHQQQ", data, directory_at + 46 + 1) == (1, 24, 3, 3, 0)
    entry2_at = directory_at + 46 + 1 + 28
    assert struct.unpack_from("<HHQQQ", data, entry2_at + 46 + 2) == (1, 24, 10, 10, second_at)
    end64_at = entry2_at + 46 + 2 + 28
    directory_size = end64_at - directory_at
    assert struct.unpack_from("<IQHHIIQQQQ", data, end64_at) == (
        0x06064B50, 44, 45, 45, 0, 0, 2, 2, directory_size, directory_at)
    assert struct.unpack_from("<IIQI", data, end64_at + 56) == (0x07064B50, 0, end64_at, 1)
    assert struct.unpack_from("<IHHHHIIH", data, end64_at + 76) == (
        0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    assert len(data) == end64_at + 76 + 22


def test_a_member_is_written_from_the_callers_buffers_as_they_are():
    """A buffer of any item type (float32, a 2-D array) is written as its bytes in memory."""
    array = numpy.array([[1.5, -2.0], [3.25, 0.0]], numpy.float32)
    data, _ = archive_of({"m": [array, array.T.copy()]})
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.read("m") == array.tobytes() + array.T.tobytes()


def test_a_buffer_that_is_not_contiguous_is_refused_before_anything_is_written():
    buffer = io.BytesIO()
    with pytest.raises((TypeError, ValueError)):
        ZipArchive(buffer).add("strided", [numpy.arange(10)[::2]])
    assert buffer.getvalue() == b""
