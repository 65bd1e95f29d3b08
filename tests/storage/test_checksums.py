"""Checksums of checkpoint files (storage/checksums.py): combined CRC-32s are zlib's CRC-32 of the
concatenation; checksums of no known kind are refused as corrupt."""

import zlib

import numpy as np
import pytest

from tests.storage.test_checkpoint_write import _state
from trainer_run.storage import checkpoint, checksums


@pytest.mark.parametrize("sizes", [(0, 0), (1, 0), (0, 7), (3, 5), (1000, 1 << 20), (12_345, 99_999)])
def test_combine_is_the_crc32_of_the_concatenation(sizes):
    rng = np.random.default_rng(sum(sizes))
    a, b = (rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes)
    assert checksums.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.parametrize("content", ["{}", "[1]", '{"size": 3}'])
def test_checksums_of_no_known_kind_are_refused_as_corrupt(tmp_path, content):
    ck = checkpoint.save(_state(), tmp_path, 4)
    (ck / checkpoint.CHECKSUMS).write_text(content)
    with pytest.raises(checkpoint.CheckpointError, match=r"checksums.json is corrupt \(it holds no crc32 "):
        checkpoint.load(ck)
