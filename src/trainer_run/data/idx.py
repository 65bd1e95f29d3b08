"""IDX files, the format of MNIST and its relatives: one n-dimensional array per file.

The layout (big-endian throughout): two zero bytes, a type code (``0x08`` uint8, ``0x09``
int8, ``0x0B`` int16, ``0x0C`` int32, ``0x0D`` float32, ``0x0E`` float64), the number of
dimensions, one uint32 per dimension, then the values in C order. A file may be gzipped;
:func:`read_idx` tells by its first two bytes (``1f 8b``), not by its name.

:func:`read_idx` returns the array in native byte order: single-byte data of a raw file is
memory-mapped (read as batches need it), anything else is read into memory (a gzipped file
is decompressed straight into the array, and never past the size its header declares). An
array read into memory is first checked against the memory available
(:func:`trainer_run.memory.check_fits`), so a header declaring more than the machine holds is
refused before anything is allocated or inflated. A file that is not IDX, or holds fewer or
more values than its header declares, is refused with a :class:`~trainer_run.errors.ConfigError`
naming it. :func:`write_idx` writes one (atomically).
"""

from __future__ import annotations

import gzip
import hashlib
import math
import struct
import zlib
from pathlib import Path

import numpy

from ..errors import ConfigError
from ..memory import check_fits
from ..storage import files

TYPES = {0x08: numpy.uint8, 0x09: numpy.int8, 0x0B: numpy.int16, 0x0C: numpy.int32,
         0x0D: numpy.float32, 0x0E: numpy.float64}
"""IDX type code: numpy type."""
CODES = {numpy.dtype(t): code for code, t in TYPES.items()}
GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 22


def read_idx(path) -> numpy.ndarray:
    """The array the IDX file ``path`` holds (gzipped or raw), in native byte order."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == GZIP_MAGIC
        if gzipped:
            with gzip.open(path, "rb") as stream:
                return _read_stream(stream, path)
        return _read_raw(path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ConfigError(f"{path} is truncated or damaged (gzip: {e or type(e).__name__}); "
                          "download or copy it again") from None
    except OSError as e:  # there, and reading it fails
        raise ConfigError(f"{path} cannot be read ({e.strerror or e})") from None


def _header(stream, path: Path) -> tuple[numpy.dtype, tuple]:
    """The element type and the shape the header of ``stream`` declares."""
    head = stream.read(4)
    if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in TYPES:
        raise ConfigError(f"{path} is not an IDX file: it starts with {head.hex() or 'nothing'} "
                          "instead of 0000, a type code (08, 09, 0b, 0c, 0d or 0e) and the "
                          "number of dimensions; give an IDX file (MNIST format), gzipped or not")
    ndim = head[3]
    dims = stream.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise _truncated(path, f"a header of {ndim} dimensions", 4 + len(dims))
    return numpy.dtype(TYPES[head[2]]).newbyteorder(">"), struct.unpack(f">{ndim}I", dims)


def _read_stream(stream, path: Path) -> numpy.ndarray:
    """The array of an IDX stream, read into memory."""
    dtype, shape = _header(stream, path)
    _check_fits(path, dtype, shape)
    array = numpy.empty(shape, dtype)
    view = memoryview(array.reshape(-1).view(numpy.uint8))
    done = 0
    while done < len(view):
        n = stream.readinto(view[done:done + CHUNK])
        if not n:
            raise _truncated(path, _describe(dtype, shape), done, data=True)
        done += n
    if stream.read(1):
        raise ConfigError(f"{path} holds more data than its header declares "
                          f"({_describe(dtype, shape)}); it is not a valid IDX file")
    return _native(array)


def _read_raw(path: Path) -> numpy.ndarray:
    """The array of a raw IDX file: memory-mapped when its values are single bytes."""
    with open(path, "rb") as f:
        dtype, shape = _header(f, path)
        offset = f.tell()
    expected = math.prod(shape) * dtype.itemsize
    held = path.stat().st_size - offset
    if held < expected:
        raise _truncated(path, _describe(dtype, shape), held, data=True)
    if held > expected:
        raise ConfigError(f"{path} holds {held - expected} bytes more than its header declares "
                          f"({_describe(dtype, shape)}); it is not a valid IDX file")
    if dtype.itemsize == 1 and expected > 0:
        return numpy.memmap(path, dtype.newbyteorder("="), "r", offset, shape)
    _check_fits(path, dtype, shape)
    values = numpy.fromfile(path, dtype, count=expected // dtype.itemsize, offset=offset)
    return _native(values.reshape(shape))


def _native(array: numpy.ndarray) -> numpy.ndarray:
    """``array`` in the machine's byte order (swapped in place when it differs)."""
    native = array.dtype.newbyteorder("=")
    return array if native == array.dtype else array.byteswap(inplace=True).view(native)


def _check_fits(path: Path, dtype: numpy.dtype, shape: tuple) -> None:
    """Refuses an array the machine's available memory cannot hold, before reading it."""
    check_fits(math.prod(shape) * dtype.itemsize, f"{path} (its header declares "
               f"{_describe(dtype, shape)})", "check that the file is the one meant, or train on "
               "a machine with more memory")


def _describe(dtype: numpy.dtype, shape: tuple) -> str:
    size = math.prod(shape) * dtype.itemsize
    return f"{'x'.join(map(str, shape)) or 'a scalar'} {dtype.name}, {size} bytes of data"


def _truncated(path: Path, declared: str, held: int, data: bool = False) -> ConfigError:
    what = "bytes of data" if data else "bytes"
    return ConfigError(f"{path} is truncated: its header declares {declared} and it holds {held} "
                       f"{what}; download or copy it again")


def write_idx(path, array, compress: bool = False) -> None:
    """Writes ``array`` (a type :data:`TYPES` lists, at most 255 dimensions) to ``path`` as an
    IDX file, gzipped when ``compress``; the file is replaced atomically."""
    array = numpy.asarray(array)
    content = header(array) + array.astype(array.dtype.newbyteorder(">")).tobytes()
    files.write_atomic(Path(path), gzip.compress(content, mtime=0) if compress else content)


def header(array: numpy.ndarray) -> bytes:
    """The IDX header of ``array``: its type code, number of dimensions and shape."""
    code = CODES.get(array.dtype.newbyteorder("="))
    if code is None:
        raise ConfigError(f"IDX files hold {', '.join(numpy.dtype(t).name for t in TYPES.values())}; "
                          f"the array is {array.dtype}")
    return bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)


def content_md5(array: numpy.ndarray) -> str:
    """The md5 of ``array`` written as an uncompressed IDX file (its header, then its values
    big-endian): for an array :func:`read_idx` read, the md5 of the file's decompressed bytes."""
    digest = hashlib.md5(header(array), usedforsecurity=False)
    rows = array.reshape(1) if array.ndim == 0 else array
    step = max(1, CHUNK // max(rows[:1].nbytes, 1))
    for start in range(0, len(rows), step):
        chunk = numpy.asarray(rows[start:start + step])
        digest.update(numpy.ascontiguousarray(chunk.astype(chunk.dtype.newbyteorder(">"))))
    return digest.hexdigest()
