"""Tokenizers of the ``tokenizers`` library (HuggingFace's): a byte-level BPE trained on the text
(``dataset.tokenizer=bpe``) and a user's ``tokenizer.json`` (``dataset.tokenizer=<path>``).

:meth:`BPETokenizer.train` learns GPT-2's byte-level BPE: the text's UTF-8 bytes, split before
words and runs of spaces by GPT-2's pattern, merged pair by pair into at most ``vocab_size``
tokens, the 256 bytes first, without special tokens; every text is encodable and
``decode(encode(text)) == text``. Training is deterministic: the same text gives the same
tokenizer. :meth:`FileTokenizer.from_file` reads a user's tokenizer in the library's JSON format
(``tokenizer.json``) as data. Both have :class:`~.tokenizers.CharTokenizer`'s interface, and
their state is the library's JSON (a plain dict) under ``"tokenizer"``.

Text arrives in chunks cut at arbitrary places (:func:`.token_files.chunks`), and a word cut in
two gives other tokens than the word whole. :func:`whole_words` re-cuts a stream of chunks
only where the pre-tokenizer splits anyway (a tokenizer's ``cut``: after a character that is
not whitespace, before a space, or for the byte-level BPE a newline too), so the tokens of the
pieces are the tokens of the whole text. Training reads the text through it, and
:func:`.token_files.write` through the tokenizer's ``pieces``. This holds for a user's tokenizer
whose pre-tokenizer splits before spaces (GPT-2's, Llama 3's, BERT's); one that marks the start
of each text (SentencePiece's Metaspace, a Strip normalizer) sees each piece as a text. The
library is imported only when one of these tokenizers is made (the ``text`` extra).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Iterable, Iterator

import numpy

from ..errors import ConfigError
from ..storage import run_files

INSTALL = "pip install 'trainer-run[text]'"
MAX_FILE_BYTES = 64 << 20
"""The largest tokenizer JSON read (the largest published ones are some 35 MB; a run keeps its
tokenizer in a record of at most 64 MiB)."""
MAX_CARRY = 1 << 22
"""Characters :func:`whole_words` holds back at most waiting for a place to cut."""
PIECE = 1 << 10
"""Characters per piece of a batch that :meth:`LibraryTokenizer.encode` encodes in parallel."""
BATCH = 128
"""Pieces per batch."""

CUT = re.compile(r"(?<=\S)[ \n]")
"""Where GPT-2's pattern (:class:`BPETokenizer`'s) always splits: before a space or a newline
after a character that is not whitespace (Python's ``\\S`` is narrower than the library's:
every character the library calls whitespace, ``str.isspace()`` does too)."""
SPACE_CUT = re.compile(r"(?<=\S) ")
"""Where the usual pre-tokenizers split (GPT-2's, Llama 3's and GPT-4's patterns, BERT's,
whitespace): before a space after a character that is not whitespace (Llama 3's joins
punctuation to the newlines after it)."""


def _library(what: str):
    try:
        import tokenizers
    except ImportError:
        raise ConfigError(f"{what} needs the tokenizers library, which is not installed; install "
                          f"it with {INSTALL}") from None
    return tokenizers


def _last_cut(text: str, cut: re.Pattern) -> int:
    """The last place of ``text`` where ``cut`` cuts, or 0 where there is none."""
    window = 256
    while True:
        start = max(0, len(text) - window)
        at = 0
        for match in cut.finditer(text, start):
            at = match.start()
        if at or start == 0:
            return at
        window *= 4


def whole_words(texts: Iterable[str], cut: re.Pattern = CUT,
                limit: int = MAX_CARRY) -> Iterator[str]:
    """The text of ``texts`` (chunks, in order) as pieces that end only where ``cut`` cuts; the
    last piece is what remains. A stretch of over ``limit`` characters without such a place
    (one word longer than that) is given as it is."""
    carry = ""
    for text in texts:
        text = carry + text
        at = _last_cut(text, cut)
        if at:
            yield text[:at]
            carry = text[at:]
        elif len(text) > limit:
            yield text
            carry = ""
        else:
            carry = text
    if carry:
        yield carry


def _pieces(text: str, cut: re.Pattern, size: int = PIECE) -> list[str]:
    """``text`` cut where ``cut`` cuts, each piece of about ``size`` characters or more."""
    pieces, start = [], 0
    while len(text) - start > size:
        match = cut.search(text, start + size)
        if match is None:
            break
        pieces.append(text[start:match.start()])
        start = match.start()
    pieces.append(text[start:])
    return pieces


class LibraryTokenizer:
    """A ``tokenizers.Tokenizer``, encoding without special tokens; :attr:`vocab_size` is one
    more than its largest id."""

    kind = ""
    cut = SPACE_CUT
    """Where a text may be cut and its pieces give the ids of the whole."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        vocabulary = tokenizer.get_vocab(with_added_tokens=True)
        if not vocabulary:
            raise ConfigError(f"the {self.kind} tokenizer has an empty vocabulary")
        self._vocab_size = max(vocabulary.values()) + 1

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def dtype(self) -> numpy.dtype:
        """The smallest unsigned integer type that holds every id (uint16 when it fits)."""
        return numpy.dtype(numpy.uint16 if self.vocab_size <= 1 << 16 else numpy.uint32)

    def encode(self, text: str) -> numpy.ndarray:
        """The ids of ``text`` (:attr:`dtype`), the library's ``encode(text)`` without special
        tokens: the text is encoded as a batch of pieces cut where :attr:`cut` cuts, in
        parallel."""
        pieces = _pieces(text, self.cut)
        lists = []
        for at in range(0, len(pieces), BATCH):      # the library's encodings: ~300 B per id
            encodings = self.tokenizer.encode_batch(pieces[at:at + BATCH], add_special_tokens=False)
            lists += [encoding.ids for encoding in encodings]
        return numpy.fromiter(itertools.chain.from_iterable(lists), dtype=self.dtype,
                              count=sum(map(len, lists)))

    def pieces(self, texts: Iterable[str]) -> Iterator[str]:
        """``texts`` (chunks of one text) cut again where :attr:`cut` cuts
        (:func:`whole_words`), so that the ids of the pieces are the ids of the whole text."""
        return whole_words(texts, self.cut)

    def decode(self, ids) -> str:
        """The text of ``ids`` (integers below :attr:`vocab_size`)."""
        ids = numpy.asarray(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ConfigError(f"token ids must lie in [0, {self.vocab_size}), got "
                              f"{int(ids.min())} to {int(ids.max())}")
        return self.tokenizer.decode(ids.astype(numpy.int64).ravel().tolist(),
                                     skip_special_tokens=False)

    def state(self) -> dict:
        """The tokenizer as plain data: ``{"kind": ..., "tokenizer": <the library's JSON>}``."""
        return {"kind": self.kind, "tokenizer": json.loads(self.tokenizer.to_str())}

    @classmethod
    def from_state(cls, state) -> LibraryTokenizer:
        """The tokenizer of :meth:`state`'s data, checked (a ConfigError of one line)."""
        if not isinstance(state, dict) or state.get("kind") != cls.kind \
                or not isinstance(state.get("tokenizer"), dict):
            raise ConfigError(f"a {cls.kind} tokenizer's state must be {{\"kind\": \"{cls.kind}\", "
                              f"\"tokenizer\": <a tokenizers JSON object>}}, got {str(state)[:80]}")
        return cls(_parse(json.dumps(state["tokenizer"]), f"the {cls.kind} tokenizer's state",
                          cls.kind))


def _parse(text: str, where: str, kind: str):
    """The library's tokenizer of the JSON ``text``, parsed as data; one line naming ``where``
    if it is not one."""
    library = _library(f"a {kind} tokenizer" if kind == "bpe" else "a tokenizer.json")
    try:
        return library.Tokenizer.from_str(text)
    except Exception as e:      # the library raises a bare Exception naming the JSON's fault
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"{where} is not a tokenizer of the tokenizers library's JSON format "
                          f"({reason[:200]}); give a tokenizer.json saved by "
                          "tokenizers (Tokenizer.save)") from None


class BPETokenizer(LibraryTokenizer):
    """A byte-level BPE (GPT-2's) learned from a text: ``dataset.tokenizer=bpe``."""

    kind = "bpe"
    cut = CUT

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """The byte-level BPE of at most ``vocab_size`` tokens learned from ``texts`` (strings in
        order, e.g. :func:`.token_files.chunks`, read through :func:`whole_words` so that how the
        text is chunked does not matter). A text with fewer distinct pairs than it takes gives a
        smaller vocabulary: :attr:`vocab_size` is then 256 plus the merges the text had."""
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256:
            raise ConfigError("dataset.tokenizer=bpe needs dataset.vocab_size, an integer of at "
                              "least 256 (its first 256 tokens are the bytes; e.g. 4096), got "
                              f"{vocab_size!r}")
        library = _library("dataset.tokenizer=bpe")
        byte_level = library.pre_tokenizers.ByteLevel
        tokenizer = library.Tokenizer(library.models.BPE())
        tokenizer.pre_tokenizer = byte_level(add_prefix_space=False)
        tokenizer.decoder = library.decoders.ByteLevel()
        trainer = library.trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                              initial_alphabet=byte_level.alphabet(),
                                              special_tokens=[])
        tokenizer.train_from_iterator(whole_words(texts, cls.cut), trainer=trainer)
        return cls(tokenizer)

    @classmethod
    def from_state(cls, state) -> BPETokenizer:
        tokenizer = super().from_state(state)
        if type(tokenizer.tokenizer.model).__name__ != "BPE":
            raise ConfigError("a bpe tokenizer's state must hold a BPE model, got "
                              f"{type(tokenizer.tokenizer.model).__name__}")
        return tokenizer


class FileTokenizer(LibraryTokenizer):
    """A user's tokenizer, read from the library's JSON format: ``dataset.tokenizer=<path>``."""

    kind = "json"

    @classmethod
    def from_file(cls, path) -> FileTokenizer:
        """The tokenizer of the file ``path`` (or of ``path/tokenizer.json`` for a folder),
        read as data: a missing file, one over :data:`MAX_FILE_BYTES` (or whose state, as the
        run keeps it with non-ASCII escaped, would be), one that is not UTF-8 JSON of a
        tokenizer are refused in one line naming it."""
        path = Path(path)
        if path.is_dir():  # the library's name for its file, a run's too
            path = path / run_files.TOKENIZER
        if not path.is_file():
            fault = "is not a file" if path.exists() else "does not exist"
            raise ConfigError(f"dataset.tokenizer={path} {fault}; give char, bpe, or the path of "
                              "a tokenizer.json")
        with open(path, "rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError(f"{path} is over {MAX_FILE_BYTES >> 20} MiB, larger than any "
                              "tokenizer.json; give the path of a tokenizer.json")
        try:
            tokenizer = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path} is not a tokenizer.json: the byte at offset {e.start} is "
                              "not UTF-8; give a tokenizer.json saved by tokenizers "
                              "(Tokenizer.save)") from None
        except (ValueError, RecursionError) as e:
            raise ConfigError(f"{path} is not a tokenizer.json: it is not JSON "
                              f"({str(e)[:120]}); "
                              "give a tokenizer.json saved by tokenizers (Tokenizer.save)") from None
        if not isinstance(tokenizer, dict):
            raise ConfigError(f"{path} is not a tokenizer.json: its JSON is a "
                              f"{type(tokenizer).__name__}, not an object; give a tokenizer.json "
                              "saved by tokenizers (Tokenizer.save)")
        if len(json.dumps(tokenizer)) > MAX_FILE_BYTES:
            raise ConfigError(f"{path} is over {MAX_FILE_BYTES >> 20} MiB as JSON with non-ASCII "
                              "characters escaped, as the run keeps it; give a smaller "
                              "tokenizer.json")
        return cls(_parse(data.decode("utf-8"), str(path), cls.kind))
