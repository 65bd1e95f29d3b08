"""MNIST's IDX format (data/idx.py), gzipped or raw, read back against arrays and bytes built
independently here: gzip told by its magic bytes, raw files memory-mapped, truncated, damaged and
foreign files refused naming them."""

from __future__ import annotations

import gzip
import struct

import numpy
import pytest

from trainer_run.data.idx import read_idx, write_idx
from trainer_run.errors import ConfigError

DTYPES = {"uint8": 0x08, "int8": 0x09, "int16": 0x0B, "int32": 0x0C, "float32": 0x0D,
          "float64": 0x0E}


SHAPES = [(7,), (4, 3), (3, 5, 2), (2, 1, 3, 4)]


def _idx_bytes(array: numpy.ndarray) -> bytes:
    """The IDX file of ``array`` built by hand from the format's definition."""
    header = bytes([0, 0, DTYPES[array.dtype.name], array.ndim])
    return header + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(
        array.dtype.newbyteorder(">")).tobytes()


def _values(dtype: str, shape: tuple) -> numpy.ndarray:
    rng = numpy.random.default_rng(len(shape))
    if dtype.startswith("float"):
        return rng.normal(0, 1000, shape).astype(dtype)
    info = numpy.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("compress", [False, True], ids=["raw", "gz"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_idx_files_read_back_exactly(tmp_path, dtype, shape, compress):
    array = _values(dtype, shape)
    content = _idx_bytes(array)
    (tmp_path / "hand.idx").write_bytes(gzip.compress(content) if compress else content)
    read = read_idx(tmp_path / "hand.idx")
    assert read.dtype == numpy.dtype(dtype) and read.dtype.isnative and read.shape == shape
    numpy.testing.assert_array_equal(read, array)
    write_idx(tmp_path / "written.idx", array, compress=compress)
    written = (tmp_path / "written.idx").read_bytes()
    assert (gzip.decompress(written) if compress else written) == content


def test_gzip_is_told_by_its_magic_bytes_not_the_name(tmp_path):
    array = numpy.arange(12, dtype=numpy.int16).reshape(3, 4) - 6
    (tmp_path / "plain.gz").write_bytes(_idx_bytes(array))
    (tmp_path / "packed.idx").write_bytes(gzip.compress(_idx_bytes(array)))
    numpy.testing.assert_array_equal(read_idx(tmp_path / "plain.gz"), array)
    numpy.testing.assert_array_equal(read_idx(tmp_path / "packed.idx"), array)


def test_a_raw_uint8_file_is_memory_mapped(tmp_path):
    array = numpy.arange(60, dtype=numpy.uint8).reshape(5, 3, 4)
    write_idx(tmp_path / "x.idx", array)
    read = read_idx(tmp_path / "x.idx")
    assert isinstance(read, numpy.memmap)
    numpy.testing.assert_array_equal(read, array)


@pytest.mark.parametrize("compress", [False, True], ids=["raw", "gz"])
def test_a_truncated_idx_file_is_refused_naming_it(tmp_path, compress):
    content = _idx_bytes(numpy.zeros((10, 4, 4), numpy.int32))
    for name, cut in (("short.idx", content[:-1]), ("header.idx", content[:9])):
        (tmp_path / name).write_bytes(gzip.compress(cut) if compress else cut)
    with pytest.raises(ConfigError) as error:
        read_idx(tmp_path / "short.idx")
    assert str(error.value) == (f"{tmp_path / 'short.idx'} is truncated: its header declares "
                                "10x4x4 int32, 640 bytes of data and it holds 639 bytes of data; "
                                "download or copy it again")
    with pytest.raises(ConfigError, match="header.idx is truncated: its header declares a header "
                                          "of 3 dimensions and it holds 9 bytes"):
        read_idx(tmp_path / "header.idx")


def test_damaged_and_foreign_files_are_refused_naming_them(tmp_path):
    content = _idx_bytes(numpy.zeros((10, 4), numpy.uint8))
    (tmp_path / "cut.gz").write_bytes(gzip.compress(content)[:-6])
    (tmp_path / "long.idx").write_bytes(content + b"\0")
    (tmp_path / "text.csv").write_bytes(b"a,b\n1,2\n")
    with pytest.raises(ConfigError, match=r"cut.gz is truncated or damaged \(gzip: "):
        read_idx(tmp_path / "cut.gz")
    with pytest.raises(ConfigError, match="long.idx holds 1 bytes more than its header declares"):
        read_idx(tmp_path / "long.idx")
    with pytest.raises(ConfigError, match="text.csv is not an IDX file: it starts with 612c620a"):
        read_idx(tmp_path / "text.csv")


def test_write_idx_refuses_a_type_idx_has_not(tmp_path):
    with pytest.raises(ConfigError, match="the array is int64"):
        write_idx(tmp_path / "x.idx", numpy.zeros(3, numpy.int64))
