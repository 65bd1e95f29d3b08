"""Tokenizers of text (data/tokenizers.py): the char tokenizer's vocabulary is the text's sorted
characters, ids round-trip, a character outside it is one line, and its state is checked data."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.data import tokenizers
from trainer_run.data.tokenizers import CharTokenizer
from trainer_run.errors import ConfigError

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\nÄpfel — naïve café 😀\n"


def test_the_vocabulary_is_the_texts_sorted_characters_and_ids_round_trip():
    tokenizer = CharTokenizer.of_text([TEXT[:20], TEXT[20:]])
    assert tokenizer.vocabulary == "".join(sorted(set(TEXT)))
    ids = tokenizer.encode(TEXT)
    assert ids.dtype == numpy.uint16
    assert ids.tolist() == [sorted(set(TEXT)).index(c) for c in TEXT]  # by hand
    assert tokenizer.decode(ids) == TEXT
    assert tokenizer.vocab_size == len(set(TEXT))


def test_a_vocabulary_beyond_uint16_takes_uint32():
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + (1 << 16) + 1)]
    tokenizer = CharTokenizer("".join(chars))
    assert tokenizer.dtype == numpy.uint32
    assert tokenizer.encode(chars[-1] + chars[0]).tolist() == [1 << 16, 0]


def test_a_character_outside_the_vocabulary_is_one_line_naming_it_and_its_place():
    tokenizer = CharTokenizer.of_text(["hello world"])
    with pytest.raises(ConfigError) as refused:
        tokenizer.encode("hello World")
    assert str(refused.value) == ("character 'W' at position 6 is not in the tokenizer's "
                                  "vocabulary of 8 characters; use only the characters of the "
                                  "text it was made from")
    with pytest.raises(ConfigError, match=r"token ids must lie in \[0, 8\), got 0 to 8"):
        tokenizer.decode([0, 8])


def test_its_state_is_plain_data_read_back_checked():
    tokenizer = CharTokenizer.of_text([TEXT])
    again = CharTokenizer.from_state(tokenizer.state())
    assert again.vocabulary == tokenizer.vocabulary
    for bad in ({"kind": "bpe", "vocabulary": "ab"}, {"kind": "char"}, ["char"],
                {"kind": "char", "vocabulary": "ba"}, {"kind": "char", "vocabulary": "aab"}):
        with pytest.raises(ConfigError):
            CharTokenizer.from_state(bad)
    with pytest.raises(ConfigError, match="the text is empty"):
        CharTokenizer.of_text(["", ""])


def test_an_unknown_tokenizer_name_or_kind_is_one_line_listing_the_choices():
    for spec in ("wordpiece", "", None):
        with pytest.raises(ConfigError) as refused:
            tokenizers.make(spec, 300, iter(()))
        assert str(refused.value) == (f"dataset.tokenizer={spec!r} is unknown; choose char, bpe, "
                                      "or the path of a tokenizer.json")
    assert type(tokenizers.make("char", None, [TEXT])) is CharTokenizer
    for bad in ({"kind": ["char"]}, {"kind": "wordpiece"}, "char"):
        with pytest.raises(ConfigError) as refused:
            tokenizers.from_state(bad)
        assert str(refused.value) == ("a tokenizer's state must name its kind (char, bpe, json), "
                                      f"got {bad}")
