"""Tokenizers of text: a tokenizer turns a string into token ids and ids back into the string.

:class:`CharTokenizer` is ``dataset.tokenizer=char`` (nanoGPT's ``shakespeare_char``): the
vocabulary is the sorted distinct characters of the text it is made from, each character one
token, so ``decode(encode(text)) == text`` for any text of those characters. Its state is plain
data (:meth:`CharTokenizer.state`, JSON), kept with the run and read back with
:meth:`CharTokenizer.from_state`, which checks it.
"""

from __future__ import annotations

import numpy

from ..errors import ConfigError


class CharTokenizer:
    """One token per character of ``vocabulary`` (a string of distinct characters, sorted by
    code point); id ``i`` is ``vocabulary[i]``."""

    kind = "char"

    def __init__(self, vocabulary: str):
        codes = numpy.array([ord(c) for c in vocabulary], dtype=numpy.int64)
        if len(codes) == 0 or (numpy.diff(codes) <= 0).any():
            raise ConfigError("a char tokenizer's vocabulary must be distinct characters sorted by "
                              f"code point, got {vocabulary[:40]!r}")
        self.vocabulary = vocabulary
        self.codes = codes
        """The vocabulary's code points, ascending: id ``i`` is ``codes[i]``."""

    @classmethod
    def of_text(cls, texts) -> CharTokenizer:
        """The tokenizer of the distinct characters of ``texts`` (strings, e.g. the chunks of
        :func:`.token_files.chunks`)."""
        codes = numpy.zeros(0, dtype=numpy.uint32)
        for text in texts:
            found = numpy.unique(numpy.frombuffer(text.encode("utf-32-le"), dtype=numpy.uint32))
            codes = numpy.union1d(codes, found)
        if len(codes) == 0:
            raise ConfigError("the text is empty; a char tokenizer needs at least one character")
        return cls(codes.astype(numpy.uint32).tobytes().decode("utf-32-le"))

    @property
    def vocab_size(self) -> int:
        return len(self.codes)

    @property
    def dtype(self) -> numpy.dtype:
        """The smallest unsigned integer type that holds every id (uint16 when it fits)."""
        return numpy.dtype(numpy.uint16 if self.vocab_size <= 1 << 16 else numpy.uint32)

    def encode(self, text: str) -> numpy.ndarray:
        """The ids of ``text``'s characters (:attr:`dtype`); a character outside the
        vocabulary is refused in one line naming it and its place."""
        codes = numpy.frombuffer(text.encode("utf-32-le"), dtype=numpy.uint32).astype(numpy.int64)
        ids = numpy.searchsorted(self.codes, codes)
        found = ids < len(self.codes)
        found[found] = self.codes[ids[found]] == codes[found]
        if not found.all():
            at = int(numpy.argmin(found))
            raise ConfigError(f"character {text[at]!r} at position {at} is not in the tokenizer's "
                              f"vocabulary of {self.vocab_size} characters; use only the "
                              "characters of the text it was made from")
        return ids.astype(self.dtype)

    def decode(self, ids) -> str:
        """The text of ``ids`` (integers below :attr:`vocab_size`)."""
        ids = numpy.asarray(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ConfigError(f"token ids must lie in [0, {self.vocab_size}), got "
                              f"{int(ids.min())} to {int(ids.max())}")
        return self.codes[ids.astype(numpy.int64)].astype(numpy.uint32).tobytes().decode("utf-32-le")

    def state(self) -> dict:
        """The tokenizer as plain data: ``{"kind": "char", "vocabulary": ...}``."""
        return {"kind": self.kind, "vocabulary": self.vocabulary}

    @classmethod
    def from_state(cls, state) -> CharTokenizer:
        """The tokenizer of :meth:`state`'s data, checked (a ConfigError of one line)."""
        if not isinstance(state, dict) or state.get("kind") != cls.kind \
                or not isinstance(state.get("vocabulary"), str):
            raise ConfigError("a char tokenizer's state must be {\"kind\": \"char\", "
                              f"\"vocabulary\": <string>}}, got {str(state)[:80]}")
        return cls(state["vocabulary"])


KINDS = {CharTokenizer.kind: CharTokenizer}
"""The tokenizers by the ``kind`` their state names."""


def make(spec, vocab_size, texts):
    """The tokenizer ``dataset.tokenizer`` names, made from ``texts`` (chunks of text):
    ``char`` (:meth:`CharTokenizer.of_text`)."""
    if spec == CharTokenizer.kind:
        return CharTokenizer.of_text(texts)
    raise ConfigError(f"dataset.tokenizer={spec!r} is unknown; choose char")


def from_state(state):
    """The tokenizer of a state one of them gave (:meth:`CharTokenizer.state`), checked."""
    kind = KINDS.get(state.get("kind")) if isinstance(state, dict) else None
    if kind is None:
        raise ConfigError(f"a tokenizer's state must name its kind ({', '.join(KINDS)}), got "
                          f"{str(state)[:80]}")
    return kind.from_state(state)
