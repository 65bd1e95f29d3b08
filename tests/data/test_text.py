"""dataset=text's loader: the examples are the text's characters as ids, the tokens and the
tokenizer are kept in the run folder and found again, a folder that may not be written is
left as it was, and what the run folder holds is read as data."""

from __future__ import annotations

import json
import os

import numpy
import pytest

from trainer_run.data import Use, description
from trainer_run.data.text import text
from trainer_run.data.text_windows import Blocks, Windows
from trainer_run.errors import ConfigError

TEXT = "to be, or not to be: that is the question.\n" * 20


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "input.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def test_the_examples_are_the_characters_ids_in_windows_and_blocks(path, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    data = text(path, block_size=8, val_fraction=0.25, use=Use(run, writable=True))
    vocabulary = sorted(set(TEXT))
    ids = numpy.array([vocabulary.index(c) for c in TEXT])
    n = int(len(TEXT) * 0.75)
    assert isinstance(data.train, Windows) and isinstance(data.val, Blocks)
    assert data.in_shape == (8,) and data.out_size == len(vocabulary) and data.task == "classification"
    x, y = data.train.take(numpy.array([0, 5]))
    numpy.testing.assert_array_equal(x, [ids[0:8], ids[5:13]])
    numpy.testing.assert_array_equal(y, [ids[1:9], ids[6:14]])
    assert len(data.val) == (len(TEXT) - n - 1) // 8
    x, y = data.val.take(numpy.array([1]))
    numpy.testing.assert_array_equal(x[0], ids[n + 8:n + 16])
    numpy.testing.assert_array_equal(y[0], ids[n + 9:n + 17])
    assert (run / "tokens.bin").read_bytes() == ids.astype(numpy.uint16).tobytes()
    recorded = json.loads((run / "tokens.json").read_text())
    assert recorded["files"][0]["bytes"] == len(TEXT.encode())


def test_a_run_finds_its_tokens_and_tokenizer_again(path, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    first = text(path, block_size=8, use=Use(run, writable=True))
    description.write(first, run)
    stamp = os.stat(run / "tokens.bin").st_mtime_ns
    # the run's tokenizer, not one of this text: a text with fewer characters keeps its ids
    path.write_text(TEXT, encoding="utf-8")
    again = text(path, block_size=8, use=Use(run, writable=True))
    assert os.stat(run / "tokens.bin").st_mtime_ns == stamp
    assert again.tokenizer.state() == first.tokenizer.state()
    other = tmp_path / "other.txt"
    other.write_text("be not\n" * 10, encoding="utf-8")
    evaluated = text(other, block_size=4, use=Use(run, evaluated="val"))
    assert evaluated.out_size == first.out_size  # the run's vocabulary
    x, _ = evaluated.val.take(numpy.array([0]))
    assert first.tokenizer.decode(x[0]) == ("be not\n" * 10)[int(70 * 0.9):][:4]
    assert os.stat(run / "tokens.bin").st_mtime_ns == stamp  # an evaluation writes nothing


def test_a_folder_that_may_not_be_written_is_left_as_it_was(path, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    data = text(path, block_size=8, use=Use(run, writable=False, evaluated="all"))
    assert list(run.iterdir()) == []
    assert isinstance(data.train, Blocks) and len(data.train) == (len(TEXT) - 1) // 8
    assert len(data.val) == 0


def test_a_damaged_tokenizer_in_the_run_is_one_line(path, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "tokenizer.json").write_text('{"kind": "char", "vocabulary": "ba"}')
    with pytest.raises(ConfigError) as e:
        text(path, block_size=8, use=Use(run, evaluated="val"))
    assert str(e.value) == (f"dataset: {run / 'tokenizer.json'} is damaged: a char tokenizer's "
                            "vocabulary must be distinct characters sorted by code point, got 'ba'")
    (run / "tokenizer.json").write_text("{not json")
    with pytest.raises(ConfigError, match="tokenizer.json is damaged: it is not JSON"):
        text(path, block_size=8, use=Use(run, evaluated="val"))
    (run / "tokenizer.json").unlink()
    (run / "tokenizer.json").symlink_to(path)
    with pytest.raises(ConfigError, match="link"):
        text(path, block_size=8, use=Use(run, evaluated="val"))


def test_a_planted_tokens_file_is_not_read_through_a_link(path, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    text(path, block_size=8, use=Use(run, writable=True))
    secret = tmp_path / "secret.bin"
    secret.write_bytes((run / "tokens.bin").read_bytes())
    (run / "tokens.bin").unlink()
    (run / "tokens.bin").symlink_to(secret)
    with pytest.raises(ConfigError, match="link"):
        text(path, block_size=8, use=Use(run, evaluated="val"))


def test_val_tokens_measures_the_first_tokens_of_the_validation_split_only(path, tmp_path):
    whole = text(path, block_size=8)
    first = text(path, block_size=8, val_tokens=20)
    assert len(first.val) == 2 and len(whole.val) > 2  # 20 predicted tokens hold 2 blocks
    for a, b in zip(first.val.take(numpy.arange(2)), whole.val.take(numpy.arange(2))):
        numpy.testing.assert_array_equal(a, b)
    with pytest.raises(ConfigError, match=r"^dataset.val_tokens"):
        text(path, block_size=8, val_tokens=0)
