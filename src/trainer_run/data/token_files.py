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
from ..storage import files as storage_files
from ..storage import reading

CHUNK = 1 << 20
"""Bytes read at a time."""


def text_files(path) -> list[Path]:
    """The files of ``path``: the file itself, or a folder's ``.txt`` files by name."""
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise ConfigError(f"dataset.path={'null' if path is None else repr(path)} names no text; give "
                          "a UTF-8 text file or a folder "
                          "of .txt files: dataset.path=input.txt")
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


def write(files: list[Path], tokenizer, out: Path, size: int = CHUNK, run: Path | None = None) -> int:
    """Writes the ids of ``files``' text under ``tokenizer`` to ``out`` (raw ids of
    ``tokenizer.dtype``, in order), chunk by chunk, the chunks cut again where the tokenizer
    says (its ``pieces``: the ids are those of the whole text); returns how many. ``out``
    appears only once it is complete, and never through a link
    (:func:`trainer_run.storage.files.write_atomic`; with ``run``, the run folder ``out`` is in,
    no link on the way either)."""
    count = 0

    def ids_to(stream) -> None:
        nonlocal count
        for text in tokenizer.pieces(chunks(files, size)):
            ids = tokenizer.encode(text)
            stream.write(ids.tobytes())
            count += len(ids)

    storage_files.write_atomic(Path(out), ids_to, run=run)
    return count


def read(path: Path, dtype, run: Path | None = None) -> numpy.ndarray:
    """The ids :func:`write` wrote to ``path``, memory-mapped read-only; a link there (with
    ``run``, on the way from the run folder too) or anything but a regular file is refused
    (:func:`trainer_run.storage.reading.open_file`)."""
    dtype = numpy.dtype(dtype)
    with reading.open_file(Path(path), None, run) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size == 0:
            return numpy.zeros(0, dtype=dtype)
        if size % dtype.itemsize:
            raise ConfigError(f"{path} holds {size} bytes, not a whole number of {dtype} token "
                              "ids; remove it and tokenize the text again")
        return numpy.memmap(stream, dtype=dtype, mode="r", shape=(size // dtype.itemsize,))
