"""Text to token ids on disk (data/token_files.py): a file or a folder's .txt files read in
chunks, a byte that is not UTF-8 named by its offset, ids written whole and mapped back."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.data import token_files
from trainer_run.data.tokenizers import CharTokenizer
from trainer_run.errors import ConfigError

TEXT = "To be, or not to be — that is the question: ü€😀\n" * 3


def test_chunks_split_between_bytes_of_a_character_give_the_text(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(TEXT, encoding="utf-8")
    for size in (1, 2, 3, 5, 7, 1 << 20):   # reads that end inside 2-, 3- and 4-byte characters
        assert "".join(token_files.chunks([path], size)) == TEXT


def test_a_folder_is_its_txt_files_in_name_order(tmp_path):
    (tmp_path / "b.txt").write_text("second ", encoding="utf-8")
    (tmp_path / "a.txt").write_text("first ", encoding="utf-8")
    (tmp_path / "c.md").write_text("not text of the set", encoding="utf-8")
    files = token_files.text_files(tmp_path)
    assert [p.name for p in files] == ["a.txt", "b.txt"]
    assert "".join(token_files.chunks(files)) == "first second "


@pytest.mark.parametrize("size", [1, 4, 1 << 20])
def test_a_byte_that_is_not_utf8_is_one_line_naming_its_offset(tmp_path, size):
    path = tmp_path / "latin1.txt"
    data = "café au lait".encode("utf-8") + "naïve".encode("latin-1") + b" end"
    path.write_bytes(data)
    offset = len("café au lait".encode("utf-8")) + 2       # the latin-1 byte of i-diaeresis
    with pytest.raises(ConfigError) as refused:
        list(token_files.chunks([path], size))
    assert str(refused.value) == (f"{path} is not UTF-8 text: the byte at offset {offset} (ef "
                                  "hex) is not part of a UTF-8 character; convert the file to "
                                  "UTF-8 (iconv -t UTF-8) and try again")
    truncated = tmp_path / "cut.txt"
    truncated.write_bytes("ab€".encode("utf-8")[:-1])       # a character cut at the end
    with pytest.raises(ConfigError, match="the byte at offset 2 "):
        list(token_files.chunks([truncated], size))


def test_missing_paths_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        token_files.text_files(tmp_path / "nope.txt")
    with pytest.raises(ConfigError, match="is a folder without .txt files"):
        token_files.text_files(tmp_path)


def test_ids_are_written_whole_and_mapped_back(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(TEXT, encoding="utf-8")
    tokenizer = CharTokenizer.of_text(token_files.chunks([path], 5))
    out = tmp_path / "train.bin"
    assert token_files.write([path], tokenizer, out, size=5) == len(TEXT)
    ids = token_files.read(out, tokenizer.dtype)
    assert isinstance(ids, numpy.memmap) and ids.dtype == numpy.uint16
    assert numpy.array_equal(ids, tokenizer.encode(TEXT))
    assert out.read_bytes() == tokenizer.encode(TEXT).tobytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "train.bin"]


def test_a_refused_write_leaves_no_file(tmp_path):
    good, bad = tmp_path / "a.txt", tmp_path / "b.txt"
    good.write_text("abc", encoding="utf-8")
    bad.write_text("abz", encoding="utf-8")
    tokenizer = CharTokenizer.of_text(["abc"])
    with pytest.raises(ConfigError, match="character 'z' at position 2"):
        token_files.write([good, bad], tokenizer, tmp_path / "train.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    (tmp_path / "odd.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ConfigError, match="holds 3 bytes, not a whole number of uint16"):
        token_files.read(tmp_path / "odd.bin", numpy.uint16)


def test_no_path_is_one_line():
    with pytest.raises(ConfigError) as e:
        token_files.text_files(None)
    assert str(e.value) == ("dataset.path=null names no text; give a UTF-8 text file or a folder of "
                            ".txt files: dataset.path=input.txt")
