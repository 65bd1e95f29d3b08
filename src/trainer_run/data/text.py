"""``dataset=text``: a UTF-8 text, one file or a folder's ``.txt`` files, as a language model's
data (:func:`text`).

1. **The tokenizer** is the run's: ``<run>/tokenizer.json`` when the run folder has one (a
   resumed, evaluated or loaded run), else made from ``dataset.tokenizer``
   (:func:`.tokenizers.make`): ``char`` from every character of the text, ``bpe`` trained on
   the text before the validation part (its first ``1 - val_fraction`` of bytes), or a path to
   a ``tokenizer.json``. The run keeps it beside ``data.json``
   (:func:`.description.write`), so a resumed run, ``trainer-eval`` and ``load_model`` use
   the very tokens the run trained on, whatever text they are given.
2. **The tokens** are written once, chunk by chunk (:mod:`.token_files`), to
   ``<run>/tokens.bin`` (raw ids, uint16 when the vocabulary fits) with ``<run>/tokens.json``,
   which records the text's files (names, sizes and SHA-256) and the tokenizer's digest, and
   memory-mapped: a corpus larger than memory trains. A run finds them again when both match;
   otherwise the text is tokenized again, into the run when its folder is writable, else
   into a temporary file that is gone when the process ends (``trainer-eval`` writes nothing
   into a run).
3. **The splits** (:mod:`.text_windows`): the validation split from the end of the tokens; the
   training examples are windows at random offsets (:class:`.text_windows.WindowIterator`),
   the validation examples the split's consecutive blocks, so the validation loss is the mean
   over every predicted token and the same each time it is measured.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy

from .. import memory
from ..errors import ConfigError, check_number
from ..storage import files as storage_files
from ..storage import reading, run_files, strict_json
from . import description, text_windows, token_files, tokenizers
from .datasets import Data, SubDataset, Use

HASH_CHUNK = 1 << 22
"""Bytes hashed at a time."""


def text(path, block_size: int = 64, tokenizer: str = "char", vocab_size: int | None = None,
         val_tokens: int | None = None, val_fraction: float = 0.1, use: Use = Use()) -> Data:
    """The language-model data of the text at ``path`` (see the module docstring): examples of
    ``block_size`` token ids with the next ids as targets, ``in_shape`` ``(block_size,)``,
    ``out_size`` the vocabulary's size, the task ``classification`` (of each next token).
    ``val_tokens`` measures only the validation split's first that many tokens (null: all of
    it), so a large corpus's evaluation takes a bounded time and is the same each time. For
    ``use.evaluated`` (``trainer-eval``) every split is in blocks, ``all`` the whole text.
    What it refuses is one ConfigError line under ``dataset``."""
    try:
        return _text(path, block_size, tokenizer, vocab_size, val_tokens, val_fraction, use)
    except ConfigError as e:
        message = str(e)
        raise ConfigError(message if message.startswith("dataset") else f"dataset: {message}") from None


def _text(path, block_size, tokenizer, vocab_size, val_tokens, val_fraction, use: Use) -> Data:
    if val_tokens is not None:
        val_tokens = check_number("dataset.val_tokens", val_tokens, low=1, integer=True)
    files = token_files.text_files(path)
    folder = Path(use.folder) if use.folder is not None else None
    with memory.blocks_returned():  # a corpus's chunks, streamed: none kept after
        source = [_described(f) for f in files]
        made = saved_tokenizer(folder) if folder is not None else None
        if made is None:
            texts = token_files.chunks(files)
            if tokenizer != "char":
                texts = _leading(texts, sum(f["bytes"] for f in source) * (1 - val_fraction))
            made = tokenizers.make(tokenizer, vocab_size, texts)
        tokens = _tokens(files, source, made, folder, use.writable)
    if use.evaluated == "all":
        return _data(text_windows.Blocks(tokens, block_size), None, made, source, path)
    train, val = text_windows.split(tokens, val_fraction, block_size)
    val = val if val_tokens is None else val[:val_tokens + 1]
    kind = text_windows.Blocks if use.evaluated else text_windows.Windows
    return _data(kind(train, block_size), text_windows.Blocks(val, block_size) if len(val) else None,
                 made, source, path)


def saved_tokenizer(folder: Path):
    """The tokenizer kept in the run folder ``folder`` (None: it has none), read as data: a
    regular file of at most :data:`~trainer_run.storage.reading.RECORD_BYTES`, refused in one
    line when it is not a tokenizer's state."""
    path = folder / run_files.TOKENIZER
    if not (path.exists() or path.is_symlink()):
        return None
    state = description.read_json(path, folder)
    try:
        return tokenizers.from_state(state)
    except ConfigError as e:
        raise ConfigError(f"{path} is damaged: {e}") from None


def _data(train, val, tokenizer, source: list, path) -> Data:
    block = train.block_size
    val = val if val is not None else SubDataset(train, numpy.arange(0))
    tokens = len(train.tokens) + (len(val.tokens) if hasattr(val, "tokens") else 0)
    note = (f"{path}: {tokens} tokens of a {tokenizer.kind} vocabulary of {tokenizer.vocab_size}, "
            f"{len(train)} training windows and {len(val)} validation blocks of {block} tokens")
    ids = {"dtype": numpy.dtype(text_windows.IDS).name, "min": 0,
           "max": tokenizer.vocab_size - 1, "whole": True}
    return Data(train, val, (block,), tokenizer.vocab_size, "classification", note=note,
                files={"text": source}, raw_inputs=ids, tokenizer=tokenizer)


def _described(path: Path) -> dict:
    """The file's name, size and SHA-256, as ``tokens.json`` and ``data.json`` record them."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as stream:
        while block := stream.read(HASH_CHUNK):
            digest.update(block)
            size += len(block)
    return {"path": str(path), "bytes": size, "sha256": digest.hexdigest()}


def _leading(texts, limit: float):
    """The chunks ``texts`` up to ``limit`` bytes of UTF-8 (the last one cut at a character)."""
    left = int(limit)
    for chunk in texts:
        data = chunk.encode("utf-8")
        if len(data) >= left:
            yield data[:left].decode("utf-8", errors="ignore")
            return
        left -= len(data)
        yield chunk


def _tokens(files: list, source: list, tokenizer, folder: Path | None, writable: bool):
    """The ids of the text: the run's ``tokens.bin`` when ``tokens.json`` says it holds this
    text under this tokenizer, else tokenized anew (into the run when ``writable``)."""
    record = {"files": [{k: f[k] for k in ("bytes", "sha256")} for f in source],
              "tokenizer": _digest(tokenizer), "dtype": tokenizer.dtype.name}
    if folder is not None and _recorded(folder) == record:
        return token_files.read(folder / run_files.TOKENS, tokenizer.dtype, folder)
    if folder is not None and writable:
        out = folder / run_files.TOKENS
        token_files.write(files, tokenizer, out, run=folder)
        storage_files.write_atomic(folder / run_files.TOKENS_RECORD,
                                   strict_json.dumps(record, indent=2), run=folder)
        return token_files.read(out, tokenizer.dtype, folder)
    with tempfile.TemporaryDirectory(prefix="trainer-run-tokens-") as scratch:
        out = Path(scratch) / run_files.TOKENS
        token_files.write(files, tokenizer, out)
        ids = token_files.read(out, tokenizer.dtype)  # mapped: kept once the file is removed
    return ids


def _recorded(folder: Path):
    """``tokens.json`` of the run folder (None: none, or not a record of ours)."""
    path = folder / run_files.TOKENS_RECORD
    if not (path.is_file() and (folder / run_files.TOKENS).is_file()):
        return None
    try:
        return json.loads(reading.read_bytes(path, reading.MARKER_BYTES * 256, folder))
    except (ValueError, RecursionError, OSError):
        return None


def _digest(tokenizer) -> str:
    return hashlib.sha256(strict_json.dumps(tokenizer.state()).encode()).hexdigest()

