"""Text read in chunks and its token ids written to a file, so a corpus larger than memory is
tokenized once and then memory-mapped.

:func:`text_files` is what ``dataset.path`` names: one UTF-8 file, or every ``.txt`` file of a
folder in name order. :func:`chunks` reads them as text a few megabytes at a time (never the
whole corpus), refusing a byte that is not UTF-8 in one line that names the file and the byte's
offset. :func:`write` streams the ids of a tokenizer (:mod:`.tokenizers`) into a file of raw
ids in the tokenizer's dtype (nanoGPT's ``train.bin``), written whole or not at all;
:func:`read` maps it back.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Iterator

import numpy

from ..errors import ConfigError

CHUNK = 1 << 20
"""Bytes read at a time."""


def text_files(path) -> list[Path]:
    """The files of ``path``: the file itself, or a folder's ``.txt`` files by name."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p for p in path.glob("*.txt") if p.is_file())
        if not found:
            raise ConfigError(f"dataset.path={path} is a folder without .txt files; give a UTF-8 "
                              "text file or a folder of .txt files")
        return found
    if not path.is_file():
        raise ConfigError(f"dataset.path={path} does not exist; give a UTF-8 text file or a "
                          "folder of .txt files")
    return [path]


def chunks(files: list[Path], size: int = CHUNK) -> Iterator[str]:
    """The text of ``files`` in order, as strings of at most ``size`` characters each (a
    character split between two reads is completed first)."""
    for path in files:
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset = 0
        with open(path, "rb") as stream:
            while True:
                data = stream.read(size)
                pending = len(decoder.getstate()[0])
                try:
                    text = decoder.decode(data, final=not data)
                except UnicodeDecodeError as e:
                    at = offset - pending + e.start
                    raise ConfigError(f"{path} is not UTF-8 text: the byte at offset {at} "
                                      f"({(e.object[e.start:e.start + 1]).hex()} hex) is not part "
                                      "of a UTF-8 character; convert the file to UTF-8 "
                                      "(iconv -t UTF-8) and try again") from None
                offset += len(data)
                if text:
                    yield text
                if not data:
                    break


def write(files: list[Path], tokenizer, out: Path, size: int = CHUNK) -> int:
    """Writes the ids of ``files``' text under ``tokenizer`` to ``out`` (raw ids of
    ``tokenizer.dtype``, in order), chunk by chunk; returns how many. ``out`` appears only once
    it is complete (a ``.part`` file is renamed)."""
    out = Path(out)
    part = out.with_name(out.name + ".part")
    count = 0
    try:
        with open(part, "wb") as stream:
            for text in chunks(files, size):
                ids = tokenizer.encode(text)
                stream.write(ids.tobytes())
                count += len(ids)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(part, out)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return count


def read(path: Path, dtype) -> numpy.ndarray:
    """The ids :func:`write` wrote to ``path``, memory-mapped read-only."""
    dtype = numpy.dtype(dtype)
    size = os.path.getsize(path)
    if size == 0:
        return numpy.zeros(0, dtype=dtype)
    if size % dtype.itemsize:
        raise ConfigError(f"{path} holds {size} bytes, not a whole number of {dtype} token ids; "
                          "remove it and tokenize the text again")
    return numpy.memmap(path, dtype=dtype, mode="r", shape=(size // dtype.itemsize,))
