"""Writing ``.npz`` archives in one pass, and reading them without pickle.

:func:`write` stores arrays as ``numpy.savez`` does (a zip of uncompressed ``.npy``
members, :mod:`trainer_run.storage.ziparchive`), sending each array's memory to the file as it is
(no copy) in one pass that also yields the file's checksum.

An archive is accepted when it is a zip file whose members are all ``.npy`` arrays
(format version 1.0 or 2.0, as ``numpy.savez`` writes them) of a dtype that holds no
Python objects, each with as many bytes of data as its header describes.
:func:`members` checks this from the zip directory and the ``.npy`` headers alone, without
reading array data; :func:`load` checks it, then checks each array's declared size against the
machine's available memory (:func:`trainer_run.memory.check_fits`) before allocating it, and
decompresses exactly the declared bytes into it (never more: a member holding more or fewer
is refused), so a compressed "bomb" is never inflated. Both raise ValueError saying what is
wrong with the archive, naming the member (OSError when it cannot be opened at all).
"""

from __future__ import annotations

import io
import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO, Mapping

import numpy
from numpy.lib import format as npy

from ..memory import check_fits
from . import files, reading
from .ziparchive import ZipArchive

# Everything a crafted zip file can make the zipfile module raise while reading it.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)
DEFLATE_RATIO = 1032
"""The most deflate expands a byte to (its longest match, 258 bytes, in 2 bits)."""
_HEADERS = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}


def write(file: BinaryIO, arrays: Mapping[str, numpy.ndarray]) -> dict:
    """Writes ``arrays`` to the binary stream ``file`` as an ``.npz`` archive, member
    ``<key>.npy`` per array (``.npy`` format 1.0, or 2.0 where a header needs it), which
    ``numpy.load(..., allow_pickle=False)`` reads back; returns the checksum of the bytes
    written (:mod:`trainer_run.storage.checksums`). ValueError for an array holding Python objects
    (only pickle could store it)."""
    archive = ZipArchive(file)
    for key, array in arrays.items():
        array = numpy.asarray(array, order="C")
        if array.dtype.hasobject:
            raise ValueError(f"array {key!r} holds Python objects, which only pickle could store")
        archive.add(f"{key}.npy", [_npy_header(array), array.reshape(-1).view(numpy.uint8)])
    archive.close()
    return archive.checksum.value()


def save(path: Path, arrays: Mapping[str, numpy.ndarray], run: Path | None = None) -> None:
    """``arrays`` as the ``.npz`` archive ``numpy.savez`` writes, at ``path``, replaced
    atomically and durably (:func:`~trainer_run.storage.files.write_atomic`; with ``run``, the
    run folder ``path`` is in, never through a link)."""
    files.write_atomic(path, lambda f: numpy.savez(f, **arrays), run=run)


def _npy_header(array: numpy.ndarray) -> bytes:
    """The ``.npy`` header of the C-contiguous ``array``, in the oldest version that holds it."""
    header = io.BytesIO()
    fields = npy.header_data_from_array_1_0(array)
    try:
        npy.write_array_header_1_0(header, fields)
    except ValueError:  # a header too long for version 1.0
        header = io.BytesIO()
        npy.write_array_header_2_0(header, fields)
    return header.getvalue()


def members(path: Path) -> dict[str, tuple[tuple[int, ...], numpy.dtype]]:
    """The arrays of the archive ``path`` as ``key -> (shape, dtype)`` (the key is the
    member name without ``.npy``), read from their headers; ValueError if it is not an
    archive of ``.npy`` arrays loadable without pickle, or a member declares more bytes
    than the archive can hold (:func:`_check_declared`). ``path`` must be a regular file,
    not a link (:func:`trainer_run.storage.reading.open_file`)."""
    with reading.open_file(Path(path)) as file:
        size = os.fstat(file.fileno()).st_size
        try:
            archive = zipfile.ZipFile(file)
        except ZIP_ERRORS:
            raise ValueError("not a zip archive of .npy arrays") from None
        with archive:
            return _members(archive, size)


def _members(archive: zipfile.ZipFile, size: int) -> dict:
    found = {}
    for info in archive.infolist():
        _check_declared(info, size)
        header = _header(archive, info)
        key = info.filename[: -len(".npy")]
        if key in found:
            raise ValueError(f"member {info.filename!r} appears twice")
        found[key] = header
    return found


def _check_declared(info: zipfile.ZipInfo, size: int) -> None:
    """Refuses a member whose declared sizes no archive of ``size`` bytes holds: stored
    bytes beyond the archive, or more data than deflate can expand them to."""
    if info.compress_size > size or info.file_size > max(info.compress_size, 1) * DEFLATE_RATIO:
        raise ValueError(f"member {info.filename!r} declares {info.file_size} bytes of data "
                         f"({info.compress_size} stored), more than an archive of {size} bytes "
                         "can hold")


def load(path: Path) -> dict[str, numpy.ndarray]:
    """The arrays of the archive ``path`` by key, after :func:`members` has checked it; each
    is read into memory of its declared size (refused when the machine lacks it) and holds
    exactly its declared bytes."""
    declared = members(path)
    try:
        with reading.open_file(Path(path)) as file, zipfile.ZipFile(file) as archive:
            return {key: _read(archive, f"{key}.npy", shape, dtype, path)
                    for key, (shape, dtype) in declared.items()}
    except ZIP_ERRORS as e:
        raise ValueError(f"its members cannot be read ({e})") from None


def _read(archive: zipfile.ZipFile, name: str, shape: tuple, dtype: numpy.dtype, path: Path):
    """Member ``name`` (a checked ``.npy`` array of ``shape`` and ``dtype``) read into memory,
    decompressing no more than its declared bytes."""
    count = math.prod(shape)
    check_fits(count * dtype.itemsize, f"{path}: member {name!r} (shape {shape}, {dtype})",
               "check that the file is the one meant, or load it on a machine with more memory")
    flat = numpy.empty(count, dtype)
    view = memoryview(flat.view(numpy.uint8))
    with archive.open(name) as f:
        version = npy.read_magic(f)
        _, fortran, _ = _HEADERS[version](f)
        done = 0
        while done < len(view):
            n = f.readinto(view[done:])
            if not n:
                break
            done += n
        if done < len(view) or f.read(1):
            raise ValueError(f"member {name!r} of {path} holds {'fewer' if done < len(view) else 'more'} "
                             f"bytes of data than its header describes ({len(view)})")
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)


def _header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], numpy.dtype]:
    """The shape and dtype of one member, checked against its size."""
    name = info.filename
    if not name.endswith(".npy"):
        raise ValueError(f"member {name!r} is not a .npy array")
    try:
        with archive.open(info) as f:
            version = npy.read_magic(f)
            if version not in _HEADERS:
                raise ValueError(f".npy format version {version} is not supported")
            shape, _, dtype = _HEADERS[version](f)
            data_bytes = info.file_size - f.tell()
    except (ValueError, *ZIP_ERRORS) as e:
        raise ValueError(f"member {name!r} is not a .npy array ({e})") from None
    if dtype.hasobject:
        raise ValueError(f"member {name!r} holds Python objects, which only pickle could load")
    expected = math.prod(shape) * dtype.itemsize
    if data_bytes != expected:
        raise ValueError(f"member {name!r} holds {data_bytes} bytes of data, its header describes "
                         f"{expected}")
    return tuple(shape), dtype
