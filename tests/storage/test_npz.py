"""Writing .npz archives in one pass (storage/npz.py): what NumPy and zipfile read back, the file's
CRC-32 and size returned, Python objects refused."""

import io
import zipfile
import zlib

import numpy as np
import pytest

from trainer_run.storage import npz

ARRAYS = {
    "params/l1/W": np.arange(12, dtype=np.float32).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(15, dtype=np.int16).reshape(3, 5)),
    "strided": np.arange(10.0)[::3],
    "scalar": np.array(2.5),
    "empty": np.zeros((0, 3), np.float64),
    "structured": np.array([(1, 2.0)], dtype=[("x", "<i4"), ("y", ">f8")]),
    "text": np.array(["ab", "c"]),
    "dates": np.array(["2020-01-01"], "M8[D]"),
    "naïve": np.ones(2, np.bool_),
    "big": np.random.default_rng(0).random(70_000),
}


def _written(arrays) -> tuple[bytes, dict]:
    buffer = io.BytesIO()
    checksum = npz.write(buffer, arrays)
    return buffer.getvalue(), checksum


def test_npz_write_is_read_back_by_numpy_and_zipfile():
    data, _ = _written(ARRAYS)
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        assert loaded.files == list(ARRAYS)
        for key, expected in ARRAYS.items():
            assert loaded[key].dtype == expected.dtype and loaded[key].shape == expected.shape
            np.testing.assert_array_equal(loaded[key], expected)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None  # every member's CRC-32 checks out
        assert all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist())
    reference = io.BytesIO()
    np.savez(reference, **ARRAYS)
    with zipfile.ZipFile(reference) as theirs, zipfile.ZipFile(io.BytesIO(data)) as ours:
        for name in theirs.namelist():  # member for member the bytes numpy.savez writes,
            if name != "fortran.npy":   # but a Fortran-ordered array is stored in C order
                assert ours.read(name) == theirs.read(name), name


def test_npz_write_returns_the_files_crc32_and_size():
    for arrays in (ARRAYS, {}, {"one": np.ones(3)}):
        data, checksum = _written(arrays)
        assert checksum == {"crc32": f"{zlib.crc32(data):08x}", "bytes": len(data)}
    with np.load(io.BytesIO(_written({})[0]), allow_pickle=False) as loaded:
        assert loaded.files == []


def test_npz_write_refuses_python_objects():
    with pytest.raises(ValueError, match="array 'o' holds Python objects"):
        _written({"o": np.array([{}, 1], dtype=object)})
