"""The tokenizers library's tokenizers (data/bpe.py): a byte-level BPE learned from a text, the
same for the same text however it is chunked, ids round-trip, a chunked text's ids are the whole
text's, the state and a user's tokenizer.json are data read back checked, each fault one line."""

from __future__ import annotations

import json
import re
import sys

import numpy
import pytest

from trainer_run.data import bpe, token_files, tokenizers
from trainer_run.data.bpe import BPETokenizer, FileTokenizer
from trainer_run.errors import ConfigError

library = pytest.importorskip("tokenizers")

VERSE = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
         "All:\nSpeak, speak.  We're resolved -- rather to die than to famish?\n"
         "\tÄpfel — naïve café 😀 über 12345 straße,   spaced   \n  out \t\n\n end\n \n")
TEXT = "".join(VERSE.replace("speak", word) for word in
               ("speak", "talk", "sing", "shout", "whisper", "cry", "read", "pray"))
UNSEEN = "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich 漢字 ∑ 🦀\r\n  \t x"


@pytest.fixture(scope="module")
def trained():
    return BPETokenizer.train([TEXT], 300)


def test_ids_round_trip_and_are_the_librarys(trained):
    for text in (TEXT, UNSEEN, ""):
        ids = trained.encode(text)
        assert ids.dtype == numpy.uint16 and (ids < 300).all()
        assert ids.tolist() == trained.tokenizer.encode(text, add_special_tokens=False).ids
        assert trained.decode(ids) == text
    # the first 256 tokens are the bytes: a character never seen is its UTF-8 bytes
    assert len(trained.encode("🦀")) == len("🦀".encode("utf-8")) == 4
    with pytest.raises(ConfigError) as refused:
        trained.decode([0, 300])
    assert str(refused.value) == "token ids must lie in [0, 300), got 0 to 300"


def test_the_vocabulary_is_vocab_size_or_what_a_small_text_has():
    assert BPETokenizer.train([TEXT], 300).vocab_size == 300
    small = BPETokenizer.train(["ab ab ab"], 1000)
    # by hand: words "ab", "Ġab", "Ġab"; merges a+b (3 times), then Ġ+ab (twice), then no pair
    assert small.vocab_size == 258
    assert small.state()["tokenizer"]["model"]["merges"] == [["a", "b"], ["Ġ", "ab"]]
    assert small.encode("ab ab").tolist() == [256, 257]
    for bad in (255, None, "300", True):
        with pytest.raises(ConfigError) as refused:
            BPETokenizer.train([TEXT], bad)
        assert str(refused.value) == ("dataset.tokenizer=bpe needs dataset.vocab_size, an "
                                      "integer of at least 256 (its first 256 tokens are the "
                                      f"bytes; e.g. 4096), got {bad!r}")


def test_training_is_deterministic_and_blind_to_how_the_text_is_chunked(trained):
    assert BPETokenizer.train([TEXT], 300).state() == trained.state()
    for size in (1, 7, 100):
        chunks = [TEXT[i:i + size] for i in range(0, len(TEXT), size)]
        assert BPETokenizer.train(chunks, 300).state() == trained.state()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 64])
def test_a_chunked_texts_ids_are_the_whole_texts(trained, size):
    text = TEXT + UNSEEN
    whole = trained.tokenizer.encode(text, add_special_tokens=False).ids
    chunks = [text[i:i + size] for i in range(0, len(text), size)]
    pieces = list(trained.pieces(chunks))
    assert "".join(pieces) == text
    assert numpy.concatenate([trained.encode(p) for p in pieces]).tolist() == whole
    naive = numpy.concatenate([trained.encode(c) for c in chunks]).tolist()
    assert naive != whole           # chunks as they come would give other tokens


def test_token_files_write_a_chunked_texts_ids_as_the_whole_texts(trained, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "train.bin"
    count = token_files.write([path], trained, out, size=5)
    ids = token_files.read(out, trained.dtype)
    assert ids.tolist() == trained.tokenizer.encode(TEXT, add_special_tokens=False).ids
    assert count == len(ids)


def test_a_stretch_without_a_place_to_cut_is_held_back_at_most_limit_characters():
    assert list(bpe.whole_words(["a" * 10] * 5, limit=25)) == ["a" * 30, "a" * 20]
    assert list(bpe.whole_words(["ab c", " d e", " f"])) == ["ab", " c d", " e", " f"]
    assert list(bpe.whole_words(["a\nb\n", "\nc"])) == ["a\nb", "\n\nc"]
    assert list(bpe.whole_words(["a\nb\n", "\nc"], bpe.SPACE_CUT)) == ["a\nb\n\nc"]


def test_the_state_is_plain_data_and_gives_the_same_ids(trained):
    state = json.loads(json.dumps(trained.state()))
    assert state["kind"] == "bpe" and state["tokenizer"]["model"]["type"] == "BPE"
    again = tokenizers.from_state(state)
    assert type(again) is BPETokenizer and again.vocab_size == 300
    assert again.encode(TEXT + UNSEEN).tolist() == trained.encode(TEXT + UNSEEN).tolist()


def test_a_damaged_state_is_one_line(trained):
    state = trained.state()
    damaged = {**state, "tokenizer": {**state["tokenizer"], "model": "garbage"}}
    with pytest.raises(ConfigError) as refused:
        tokenizers.from_state(damaged)
    assert re.fullmatch(
        r"the bpe tokenizer's state is not a tokenizer of the tokenizers library's JSON format "
        r"\(data did not match any variant of untagged enum ModelUntagged at line 1 column \d+\); "
        r"give a tokenizer.json saved by tokenizers \(Tokenizer.save\)", str(refused.value))
    with pytest.raises(ConfigError) as refused:
        tokenizers.from_state({"kind": "bpe", "tokenizer": "{}"})
    assert str(refused.value) == ("a bpe tokenizer's state must be {\"kind\": \"bpe\", "
                                  "\"tokenizer\": <a tokenizers JSON object>}, got {'kind': "
                                  "'bpe', 'tokenizer': '{}'}")
    word_level = {**state, "tokenizer": {**state["tokenizer"], "model": {
        "type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}}
    with pytest.raises(ConfigError, match="^a bpe tokenizer's state must hold a BPE model, got "
                                          "WordLevel$"):
        tokenizers.from_state(word_level)


def _word_level(path):
    """A user's tokenizer.json, not a BPE: whole words of a vocabulary of three, split at
    whitespace."""
    made = library.Tokenizer(library.models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2},
                                                      unk_token="[UNK]"))
    made.pre_tokenizer = library.pre_tokenizers.WhitespaceSplit()
    made.save(str(path))
    return path


def test_a_users_tokenizer_json_is_read_as_data(trained, tmp_path):
    path = _word_level(tmp_path / "tokenizer.json")
    for spec in (str(path), str(tmp_path)):                 # the file, or a folder holding it
        user = tokenizers.make(spec, None, iter(()))
        assert type(user) is FileTokenizer and user.kind == "json" and user.vocab_size == 3
        assert user.encode("hello world  hello moon").tolist() == [1, 2, 1, 0]   # by hand
        assert user.decode([1, 2]) == "hello world"
        assert user.state() == {"kind": "json", "tokenizer": json.loads(path.read_text())}
        assert tokenizers.from_state(user.state()).encode("world").tolist() == [2]
    trained.tokenizer.save(str(tmp_path / "bpe.json"))      # the library's own file of a BPE
    again = tokenizers.make(str(tmp_path / "bpe.json"), None, iter(()))
    assert again.encode(TEXT).tolist() == trained.encode(TEXT).tolist()


def test_a_file_that_is_not_a_tokenizer_json_is_one_line_naming_it(tmp_path, monkeypatch):
    fix = "give a tokenizer.json saved by tokenizers (Tokenizer.save)"
    missing = tmp_path / "nope.json"
    cases = [(b"{not json", "it is not JSON (Expecting property name enclosed in double quotes: "
                            f"line 1 column 2 (char 1)); {fix}"),
             (b"[1, 2]", f"its JSON is a list, not an object; {fix}"),
             (b"\xff{}", f"the byte at offset 0 is not UTF-8; {fix}")]
    for i, (data, reason) in enumerate(cases):
        path = tmp_path / f"bad{i}.json"
        path.write_bytes(data)
        with pytest.raises(ConfigError) as refused:
            tokenizers.make(str(path), None, iter(()))
        assert str(refused.value) == f"{path} is not a tokenizer.json: {reason}"
    path = tmp_path / "other.json"
    path.write_text('{"answer": 42}', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        FileTokenizer.from_file(path)
    assert str(refused.value) == (f"{path} is not a tokenizer of the tokenizers library's JSON "
                                  "format (expected `,` or `}` at line 1 column 10); " + fix)
    with pytest.raises(ConfigError) as refused:
        tokenizers.make(str(missing), None, iter(()))
    assert str(refused.value) == (f"dataset.tokenizer={missing} does not exist; give char, bpe, "
                                  "or the path of a tokenizer.json")
    monkeypatch.setattr(bpe, "MAX_FILE_BYTES", 1 << 20)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(ConfigError) as refused:
        FileTokenizer.from_file(big)
    assert str(refused.value) == (f"{big} is over 1 MiB, larger than any tokenizer.json; give "
                                  "the path of a tokenizer.json")
    escaped = tmp_path / "escaped.json"      # 0.6 MiB of UTF-8, 1.2 MiB with \\u escapes
    escaped.write_text(json.dumps({"a": "é" * 300_000}, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        FileTokenizer.from_file(escaped)
    assert str(refused.value) == (f"{escaped} is over 1 MiB as JSON with non-ASCII characters "
                                  "escaped, as the run keeps it; give a smaller tokenizer.json")
    (tmp_path / "sub").mkdir()                  # a folder without a tokenizer.json
    with pytest.raises(ConfigError) as refused:
        tokenizers.make(str(tmp_path / "sub"), None, iter(()))
    assert str(refused.value) == (f"dataset.tokenizer={tmp_path / 'sub' / 'tokenizer.json'} does "
                                  "not exist; give char, bpe, or the path of a tokenizer.json")


def test_without_the_library_bpe_and_a_tokenizer_json_are_one_line(trained, tmp_path, monkeypatch):
    path = _word_level(tmp_path / "tokenizer.json")
    state = trained.state()
    monkeypatch.setitem(sys.modules, "tokenizers", None)    # import tokenizers: ImportError
    install = "which is not installed; install it with pip install 'trainer-run[text]'"
    for call, what in ((lambda: tokenizers.make("bpe", 300, [TEXT]), "dataset.tokenizer=bpe"),
                       (lambda: tokenizers.from_state(state), "a bpe tokenizer"),
                       (lambda: tokenizers.make(str(path), None, iter(())), "a tokenizer.json")):
        with pytest.raises(ConfigError) as refused:
            call()
        assert str(refused.value) == f"{what} needs the tokenizers library, {install}"
    assert tokenizers.make("char", None, ["abc"]).vocab_size == 3   # char needs none
