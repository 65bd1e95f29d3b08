"""Writing a checkpoint in one pass: the .npz our writer makes is what NumPy and zipfile read,
its checksum (kept while writing) is zlib's CRC-32 of the file, any damaged byte is refused,
and checkpoints holding the SHA-256 of their files (written before) still load."""

import hashlib
import io
import json
import os
import zipfile
import zlib

import numpy as np
import pytest

from trainer_run.storage import checkpoint, checksums, npz

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


@pytest.mark.parametrize("sizes", [(0, 0), (1, 0), (0, 7), (3, 5), (1000, 1 << 20), (12_345, 99_999)])
def test_combine_is_the_crc32_of_the_concatenation(sizes):
    rng = np.random.default_rng(sum(sizes))
    a, b = (rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes)
    assert checksums.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def _state():
    return {"iteration": 4, "w": np.arange(300.0).reshape(10, 30), "m": [np.ones(7, np.float32)]}


def test_a_checkpoint_records_the_crc32_and_size_of_its_files(tmp_path):
    ck = checkpoint.save(_state(), tmp_path, 4)
    recorded = json.loads((ck / checkpoint.CHECKSUMS).read_text())
    for name in (checkpoint.STATE, checkpoint.ARRAYS):
        data = (ck / name).read_bytes()
        assert recorded["crc32"][name] == f"{zlib.crc32(data):08x}"
        assert recorded["bytes"][name] == len(data)


def test_every_damaged_byte_of_the_arrays_is_refused(tmp_path):
    ck = checkpoint.save(_state(), tmp_path, 4)
    path = ck / checkpoint.ARRAYS
    intact = path.read_bytes()
    # every byte of the headers, directory and end records, and a stride through the data
    positions = sorted({*range(0, 200), *range(len(intact) - 400, len(intact)),
                        *range(200, len(intact), 97)})
    for position in positions:
        damaged = bytearray(intact)
        damaged[position] ^= 0x10
        path.write_bytes(bytes(damaged))
        with pytest.raises(checkpoint.CheckpointError, match="does not match its checksum"):
            checkpoint.load(ck)
    path.write_bytes(intact + b"\0")
    assert not checkpoint.is_complete(ck)
    path.write_bytes(intact)
    np.testing.assert_array_equal(checkpoint.load(ck)["w"], _state()["w"])


def _as_written_before(ck) -> None:
    """Rewrites the checksums as checkpoints written before this writer held them: SHA-256."""
    digests = {name: hashlib.sha256((ck / name).read_bytes()).hexdigest()
               for name in (checkpoint.STATE, checkpoint.ARRAYS)}
    (ck / checkpoint.CHECKSUMS).write_text(json.dumps({"sha256": digests}))


def test_a_checkpoint_with_sha256_checksums_loads_and_its_damage_is_refused(tmp_path):
    ck = checkpoint.save(_state(), tmp_path, 4)
    arrays = ck / checkpoint.ARRAYS
    with open(arrays, "wb") as f:  # the arrays as numpy.savez wrote them then
        np.savez(f, **{"w": _state()["w"], "m/0": _state()["m"][0]})
    _as_written_before(ck)
    loaded = checkpoint.load(ck)
    np.testing.assert_array_equal(loaded["w"], _state()["w"])
    np.testing.assert_array_equal(loaded["m"][0], _state()["m"][0])
    data = bytearray(arrays.read_bytes())
    data[len(data) // 2] ^= 1
    arrays.write_bytes(bytes(data))
    os.utime(arrays, ns=(1, 1))  # another version of the file, not a cached digest
    with pytest.raises(checkpoint.CheckpointError, match="does not match its checksum"):
        checkpoint.load(ck)


@pytest.mark.parametrize("content", ["{}", "[1]", '{"size": 3}'])
def test_checksums_of_no_known_kind_are_refused_as_corrupt(tmp_path, content):
    ck = checkpoint.save(_state(), tmp_path, 4)
    (ck / checkpoint.CHECKSUMS).write_text(content)
    with pytest.raises(checkpoint.CheckpointError, match=r"checksums.json is corrupt \(it holds no crc32 "):
        checkpoint.load(ck)
