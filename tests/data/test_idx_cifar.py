"""The file formats of the image sets: IDX (MNIST's, gzipped or raw) and CIFAR-10's binary
release, read back against arrays and bytes built independently here."""

from __future__ import annotations

import gzip
import hashlib
import re
import struct
import tarfile

import numpy
import pytest
from image_files import CIFAR_CLASSES, cifar_archive

from trainer_run.data import cifar
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


def test_a_cifar_archive_extracts_once_and_reads_back_exactly(tmp_path):
    arrays = cifar_archive(tmp_path / "cifar-10-binary.tar.gz", per_batch=3)
    batches = cifar.extract(tmp_path / "cifar-10-binary.tar.gz", tmp_path)
    assert batches == tmp_path / "cifar-10-batches-bin" == cifar.extracted(tmp_path)
    assert sorted(p.name for p in batches.iterdir()) == sorted(cifar.MEMBERS)  # not readme.html
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cifar-10-batches-bin",
                                                          "cifar-10-binary.tar.gz"]
    (tmp_path / "cifar-10-binary.tar.gz").unlink()  # later reads need only the folder
    train, test, classes = cifar.read(batches)
    assert classes == CIFAR_CLASSES
    for (x, y), (x_ref, y_ref) in ((train, arrays["train"]), (test, arrays["test"])):
        assert x.dtype == numpy.uint8 and x.shape == x_ref.shape
        numpy.testing.assert_array_equal(x, x_ref)
        numpy.testing.assert_array_equal(y, y_ref)
    assert train[0].shape == (15, 3, 32, 32) and test[0].shape == (3, 3, 32, 32)


def test_an_archive_read_in_place_gives_the_folders_arrays_and_writes_nothing(tmp_path):
    """read_archive: the arrays read() gives from the extracted folder, the same records'
    md5, the published counts checked by member; the archive's folder is left as it was."""
    archive = tmp_path / "in" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    arrays = cifar_archive(archive, per_batch=4)
    in_place, from_disk = hashlib.md5(), hashlib.md5()
    train, test, classes = cifar.read_archive(archive, {"train": 4, "test": 4}, in_place)
    assert sorted(p.name for p in archive.parent.iterdir()) == ["cifar-10-binary.tar.gz"]
    batches = cifar.extract(archive, tmp_path)
    assert classes == CIFAR_CLASSES
    for (x, y), (x_ref, y_ref), (x_disk, _) in zip((train, test), (arrays["train"], arrays["test"]),
                                                   cifar.read(batches, None, from_disk)[:2]):
        numpy.testing.assert_array_equal(x, x_ref)
        numpy.testing.assert_array_equal(x, x_disk)
        numpy.testing.assert_array_equal(y, y_ref)
    joined = b"".join((batches / name).read_bytes() for name in (*cifar.TRAIN, cifar.TEST))
    assert in_place.hexdigest() == from_disk.hexdigest() == hashlib.md5(joined).hexdigest()
    with pytest.raises(ConfigError, match=re.escape(
            f"{archive}:cifar-10-batches-bin/data_batch_1.bin holds 4 records, not the 5 of "
            "CIFAR-10's published batches (dataset.examples.train=25): it is not a copy of the "
            "release; replace it with cifar-10-binary.tar.gz")):
        cifar.read_archive(archive, {"train": 5, "test": 4})


def test_a_cifar_member_of_the_wrong_size_is_refused_and_nothing_extracted(tmp_path):
    member = "cifar-10-batches-bin/data_batch_3.bin"
    cifar_archive(tmp_path / "c.tar.gz", per_batch=2, sizes={member: 2 * 3073 - 1})
    with pytest.raises(ConfigError) as error:
        cifar.extract(tmp_path / "c.tar.gz", tmp_path)
    assert str(error.value) == (f"{tmp_path / 'c.tar.gz'}: {member} has 6145 bytes, not a multiple "
                                "of 3073 (CIFAR-10 batches are records of 3073 bytes); the archive "
                                "is damaged: delete it to download it again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tar.gz"]


def test_links_and_stray_paths_in_a_cifar_archive_write_nothing_outside(tmp_path):
    link = tarfile.TarInfo("cifar-10-batches-bin/test_batch.bin")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    stray = {"../evil.bin": b"x", f"{tmp_path}/evil.bin": b"x", "cifar-10-batches-bin/../../e.bin": b"x"}
    (tmp_path / "in").mkdir()
    cifar_archive(tmp_path / "in" / "c.tar.gz", extra=stray)
    batches = cifar.extract(tmp_path / "in" / "c.tar.gz", tmp_path / "in")
    assert sorted(p.name for p in batches.iterdir()) == sorted(cifar.MEMBERS)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["in", "c.tar.gz", batches.name,
                                                                  *cifar.MEMBERS])
    (tmp_path / "out").mkdir()
    cifar_archive(tmp_path / "out" / "c.tar.gz", extra={link.name: link})
    with pytest.raises(ConfigError, match="test_batch.bin is not a regular file"):
        cifar.extract(tmp_path / "out" / "c.tar.gz", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["c.tar.gz"]


def test_archives_that_are_not_the_release_are_refused(tmp_path):
    (tmp_path / "a.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(ConfigError, match="a.tar.gz is not a readable tar.gz archive"):
        cifar.extract(tmp_path / "a.tar.gz", tmp_path)
    with tarfile.open(tmp_path / "b.tar.gz", "w:gz"):
        pass
    with pytest.raises(ConfigError, match=r"b.tar.gz lacks cifar-10-batches-bin/data_batch_1.bin, "):
        cifar.extract(tmp_path / "b.tar.gz", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "b.tar.gz"]


def test_a_damaged_extracted_folder_is_refused_naming_the_file(tmp_path):
    cifar_archive(tmp_path / "c.tar.gz", per_batch=2)
    batches = cifar.extract(tmp_path / "c.tar.gz", tmp_path)
    records = bytearray((batches / "test_batch.bin").read_bytes())
    records[3073] = 10  # the second record's label
    (batches / "test_batch.bin").write_bytes(bytes(records))
    with pytest.raises(ConfigError, match=r"test_batch.bin: record 1 has label 10 and "
                                          r"batches.meta.txt names 10 classes"):
        cifar.read(batches)
    (batches / "data_batch_5.bin").unlink()
    with pytest.raises(ConfigError, match="cifar-10-batches-bin lacks data_batch_5.bin; delete"):
        cifar.read(batches)
