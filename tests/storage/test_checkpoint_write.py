"""Writing a checkpoint in one pass: the .npz our writer makes is what NumPy and zipfile read,
its checksum (kept while writing) is zlib's CRC-32 of the file, any damaged byte is refused,
and checkpoints holding the SHA-256 of their files (written before) still load."""

import hashlib
import json
import os
import zlib

import numpy as np
import pytest

from trainer_run.storage import checkpoint


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
