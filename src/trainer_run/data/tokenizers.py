"""Tokenizers of text: a tokenizer turns a string into token ids and ids back into the string.

:class:`CharTokenizer` is ``dataset.tokenizer=char`` (nanoGPT's ``shakespeare_char``): the
vocabulary is the sorted distinct characters of the text it is made from, each character one
token, so ``decode(encode(text)) == text`` for any text of those characters. Its state is plain
data (:meth:`CharTokenizer.state`, JSON), kept with the run and read back with
:meth:`CharTokenizer.from_state`, which checks it.

:func:`make` is what ``dataset.tokenizer`` names: ``char``, ``bpe`` (:class:`.bpe.BPETokenizer`,
learned from the text) or the path of a user's ``tokenizer.json`` (:class:`.bpe.FileTokenizer`);
:func:`from_state` reads any of them back from its state by its ``"kind"``.
"""

from __future__ import annotations

from pathlib import Path

import numpy

from ..errors import ConfigError
from .bpe import BPETokenizer, FileTokenizer


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

    @staticmethod
    def pieces(texts):
        """``texts`` as they are: a text's ids are those of its parts, wherever it is cut."""
        return texts

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


KINDS = {kind.kind: kind for kind in (CharTokenizer, BPETokenizer, FileTokenizer)}
"""The tokenizers by the ``kind`` their state names."""

CHOICES = "char, bpe, or the path of a tokenizer.json"


def make(spec, vocab_size, texts):
    """The tokenizer ``dataset.tokenizer`` names, made from ``texts`` (chunks of text): ``char``
    (:meth:`CharTokenizer.of_text`), ``bpe`` of at most ``vocab_size`` tokens
    (:meth:`.bpe.BPETokenizer.train`), or a path: a ``tokenizer.json``, or a folder holding one
    (:meth:`.bpe.FileTokenizer.from_file`, which ignores ``texts``). A name that is none of
    these (no ``/``, not ending in ``.json``, no such file) is one line listing them."""
    if spec == CharTokenizer.kind:
        return CharTokenizer.of_text(texts)
    if spec == BPETokenizer.kind:
        return BPETokenizer.train(texts, vocab_size)
    if not isinstance(spec, str) or not spec or \
            ("/" not in spec and not spec.endswith(".json") and not Path(spec).exists()):
        raise ConfigError(f"dataset.tokenizer={spec!r} is unknown; choose {CHOICES}")
    return FileTokenizer.from_file(spec)


def from_state(state):
    """The tokenizer of a state one of them gave (their ``state()``), by its ``"kind"``,
    checked."""
    name = state.get("kind") if isinstance(state, dict) else None
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ConfigError(f"a tokenizer's state must name its kind ({', '.join(KINDS)}), got "
                          f"{str(state)[:80]}")
    return kind.from_state(state)
