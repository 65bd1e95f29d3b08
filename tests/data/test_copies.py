"""A user's copy of a standard image set (src/trainer_run/data/copies.py): the note that names
the files accepted for their content stays one short line, however many files and folders."""

from __future__ import annotations

from trainer_run.data import copies

FOLDER = "/data/MNIST/raw"
NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")


def _record(path: str, md5: str, expected: str | None = "f" * 32) -> dict:
    return {"path": path, "md5": md5, "published": md5 == expected, "expected": expected}


def test_files_accepted_for_their_content_are_counted_in_one_short_line():
    records = [_record(f"{FOLDER}/{name}", "a" * 32) for name in NAMES]
    line = copies.note(records, "valid headers")
    assert line == (f"4 files in {FOLDER} are used for content (valid headers), not md5 "
                    "(uncompressed); data.json records the checksums")
    assert len(line) < 130


def test_one_recompressed_file_is_named_and_published_ones_or_unchecked_ones_say_nothing():
    one = [_record("/d/cifar-10-binary.tar.gz", "a" * 32),
           _record("/d/other.gz", "f" * 32), _record("/d/free.gz", "b" * 32, expected=None)]
    assert copies.note(one, "members") == ("cifar-10-binary.tar.gz in /d is used for content "
                                           "(members), not md5 (another md5); data.json records "
                                           "the checksums")
    assert copies.note(one[1:], "members") is None
