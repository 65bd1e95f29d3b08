"""Reading ``.npz`` archives without pickle.

An archive is accepted when it is a zip file whose members are all ``.npy`` arrays
(format version 1.0 or 2.0, as ``numpy.savez`` writes them) of a dtype that holds no
Python objects, each with as many bytes of data as its header describes.
:func:`members` checks this from the zip directory and the ``.npy`` headers alone, without
reading array data; :func:`load` checks it and then reads the arrays with
``numpy.load(..., allow_pickle=False)``. Both raise ValueError saying what is wrong with the
archive (OSError when it cannot be opened at all).
"""

from __future__ import annotations

import math
import zipfile
import zlib
from pathlib import Path

import numpy
from numpy.lib import format as npy

# Everything a crafted zip file can make the zipfile module raise while reading it.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)
_HEADERS = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}


def members(path: Path) -> dict[str, tuple[tuple[int, ...], numpy.dtype]]:
    """The arrays of the archive ``path`` as ``key -> (shape, dtype)`` (the key is the
    member name without ``.npy``), read from their headers; ValueError if it is not an
    archive of ``.npy`` arrays loadable without pickle."""
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_ERRORS:
        raise ValueError("not a zip archive of .npy arrays") from None
    with archive:
        found = {}
        for info in archive.infolist():
            header = _header(archive, info)
            key = info.filename[: -len(".npy")]
            if key in found:
                raise ValueError(f"member {info.filename!r} appears twice")
            found[key] = header
        return found


def load(path: Path) -> dict[str, numpy.ndarray]:
    """The arrays of the archive ``path`` by key, after :func:`members` has checked it."""
    members(path)
    try:
        with numpy.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (ValueError, *ZIP_ERRORS) as e:
        raise ValueError(str(e)) from None


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
