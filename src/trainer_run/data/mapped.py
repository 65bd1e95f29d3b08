"""``.npy`` files read through a read-only memory map whose pages do not pile up in the process.

:func:`open_npy` maps a file and returns a :class:`MappedArray`: an array-like (``len``,
``shape``, ``dtype``, ``ndim``, ``size``, ``nbytes``, ``reshape``, ``numpy.asarray``) whose
reads, ``a[indices]``, ``a[start:stop]`` or ``a[i]``, return ordinary in-memory arrays,
never views of the map. Only the rows read are read from the file.

Resident memory: each page of the map a read touches stays mapped into the process (counted in
its resident set, ``RssFile``) until the process lets it go, and the kernel maps more than the
bytes asked for: up to 64 KiB around a faulted page ("fault-around"), or a whole 2 MiB block
(x86-64's PMD size, read from ``/sys/kernel/mm/transparent_hugepage/hpage_pmd_size``) where
the file's cache is held in blocks that large. Random rows of a large file would otherwise
end up holding the whole file. Every read therefore adds an upper bound of the bytes it may
have brought in (the distinct blocks its rows lie in) to a count,
and once the count reaches ``budget`` the whole map's pages are dropped from the process
(``madvise(MADV_DONTNEED)``: the data stays in the operating system's file cache, so a later
read of them costs a page fault, not a disk read) and the count restarts. A read of rows by
an index array whose bound exceeds the budget is done in pieces of at most the budget, with
the count (and drops) in between, so the map's resident memory stays below about twice the
budget whatever the batch. A file no larger than ``budget`` is never dropped (it cannot exceed
it). Where ``madvise`` is missing (Python built without it), nothing is dropped.

Reads may come from several threads at once (the prefetch thread and the evaluation, say):
the count is kept under a lock, and a drop never changes what a read returns.

A file that is not a ``.npy`` array, is truncated, or holds Python objects (which would need
unpickling, never done here) is refused with a :class:`~trainer_run.errors.ConfigError`
naming the file.
"""

from __future__ import annotations

import math
import mmap
import os
import threading
from pathlib import Path

import numpy
from numpy.lib import format as npy_format

from ..errors import ConfigError, check_number

DROP_BYTES = 256 << 20
"""Default ``budget``: the bytes of reads after which a map's pages are dropped."""
CAN_DROP = hasattr(mmap.mmap, "madvise") and hasattr(mmap, "MADV_DONTNEED")


def _fault_span() -> int:
    """The most the kernel maps into the process on one page fault: the PMD size (a whole
    large block of file cache), at least Linux's 64 KiB fault-around; 2 MiB where unknown."""
    try:
        pmd = int(Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read_text())
    except (OSError, ValueError):
        pmd = 2 << 20
    return max(pmd, 64 << 10)


FAULT_SPAN = _fault_span()


def open_npy(path, budget: int | None = DROP_BYTES) -> MappedArray:
    """The array in the ``.npy`` file ``path``, mapped read-only; its pages are dropped from
    the process after every ``budget`` bytes of reads (None: never; see the module
    docstring). Raises :class:`ConfigError` naming the file when it cannot be read, is no
    ``.npy`` array, is truncated or holds Python objects."""
    path = os.fspath(path)
    if budget is not None:
        budget = check_number("budget", budget, low=1, integer=True)
    try:
        with open(path, "rb") as f:
            shape, fortran_order, dtype, offset = _header(f, path)
            size = os.fstat(f.fileno()).st_size
            count = math.prod(shape)
            needed = offset + count * dtype.itemsize
            if size < needed:
                raise ConfigError(f"{path} is truncated: its header describes a {dtype} array of "
                                  f"shape {shape} ({needed} bytes with the header) and the file has "
                                  f"{size} bytes; write it again")
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    flat = numpy.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
    array = flat.reshape(shape[::-1]).T if fortran_order else flat.reshape(shape)
    return MappedArray(_Mapping(mapped, budget, path, offset), array)


def _header(f, path: str):
    """Shape, Fortran order, dtype and data offset of the ``.npy`` file open as ``f``."""
    readers = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}
    try:
        version = npy_format.read_magic(f)
        if version in readers:
            shape, fortran_order, dtype = readers[version](f)
    except ValueError as e:
        raise ConfigError(f"{path} is not a readable .npy array file ({e}); save it with "
                          "numpy.save") from None
    if version == (3, 0):
        raise ConfigError(f"{path} is a .npy file of format version 3.0, written for structured "
                          "types with non-Latin-1 field names; save a plain numeric array")
    if version not in readers:
        raise ConfigError(f"{path} is not a readable .npy array file (format version "
                          f"{version[0]}.{version[1]} does not exist); save it with numpy.save")
    if dtype.hasobject:
        raise ConfigError(f"{path} holds Python objects ({dtype}), which only unpickling could read, "
                          "and trainer-run never unpickles a file; save numeric arrays (for class "
                          "names: strings of fixed width, e.g. numpy.array(names, dtype=str))")
    return shape, fortran_order, dtype, f.tell()


class _Mapping:
    """One file's read-only map, and the count of bytes read from it since its pages were
    last dropped."""

    def __init__(self, mapped: mmap.mmap, budget: int | None, path: str, offset: int = 0):
        self.mapped = mapped
        self.path = path
        self.offset = offset
        """Where the array's data starts in the file (after the ``.npy`` header)."""
        self.budget = budget if CAN_DROP and budget is not None and len(mapped) > budget else None
        self.pending = 0
        self.drops = 0
        """How many times the pages were dropped (for tests and benchmarks)."""
        self._lock = threading.Lock()

    def read(self, nbytes: int) -> None:
        """Counts a read that may have brought ``nbytes`` of the map in; at the budget, drops
        the map's pages from the process."""
        if self.budget is None:
            return
        with self._lock:
            self.pending += nbytes
            if self.pending >= self.budget:
                self.mapped.madvise(mmap.MADV_DONTNEED)
                self.pending = 0
                self.drops += 1


class MappedArray:
    """An array in a memory-mapped ``.npy`` file (from :func:`open_npy`); reads return
    in-memory arrays. ``reshape`` gives another view of the same map, with the same count
    of bytes read."""

    def __init__(self, mapping: _Mapping, array: numpy.ndarray):
        self._mapping = mapping
        self._array = array

    @property
    def path(self) -> str:
        return self._mapping.path

    @property
    def drops(self) -> int:
        """How many times the map's pages were dropped from the process so far."""
        return self._mapping.drops

    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def dtype(self) -> numpy.dtype:
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def size(self) -> int:
        return self._array.size

    @property
    def nbytes(self) -> int:
        return self._array.nbytes

    def __len__(self) -> int:
        return len(self._array)

    def __repr__(self) -> str:
        return f"MappedArray({self.path!r}, shape={self.shape}, dtype={self.dtype})"

    def reshape(self, *shape) -> MappedArray:
        """The same data in another shape (as ``numpy.ndarray.reshape``), still mapped."""
        return MappedArray(self._mapping, self._array.reshape(*shape))

    def __getitem__(self, key):
        """``array[key]`` with NumPy's indexing rules, as an in-memory array (or scalar)."""
        if isinstance(key, numpy.ndarray) and key.dtype.kind in "iu":
            return self._take(key)
        out = self._array[key]
        if isinstance(out, numpy.ndarray) and numpy.may_share_memory(out, self._array):
            out = out.copy()
        self._mapping.read(self._touched(key))
        return out

    def _take(self, indices: numpy.ndarray) -> numpy.ndarray:
        """Rows ``indices`` (``array[indices]``; ``numpy.take`` copies whole rows faster), in
        pieces whose bound of bytes brought in is at most the budget, counted one by one."""
        budget = self._mapping.budget
        touched = self._touched(indices)
        if budget is None or touched <= budget or not self._array.flags.c_contiguous:
            out = numpy.take(self._array, indices, axis=0)
            self._mapping.read(touched)
            return out
        out = numpy.empty(indices.shape + self.shape[1:], self.dtype)
        flat, rows = indices.reshape(-1), out.reshape(-1, *self.shape[1:])
        step = max(1, flat.size * budget // touched)
        for start in range(0, flat.size, step):
            piece = flat[start:start + step]
            rows[start:start + step] = numpy.take(self._array, piece, axis=0)
            self._mapping.read(self._touched(piece))
        return out

    def __array__(self, dtype=None, copy=None):
        """The whole array in memory, read in pieces of at most the budget (pages dropped in
        between). ``copy=False`` is refused: the data is always copied out of the map."""
        if copy is False:
            raise ValueError(f"{self!r} is read into memory by a copy; copy=False cannot be met")
        out = numpy.empty(self.shape, self.dtype)
        if self.ndim == 0 or len(self) == 0:
            out[...] = self._array
        else:
            step = max(1, (self._mapping.budget or DROP_BYTES) // max(self._row_bytes(), 1))
            for start in range(0, len(self), step):
                out[start:start + step] = self._array[start:start + step]
                self._mapping.read(self._touched(slice(start, start + step)))
        return out if dtype is None else out.astype(dtype, copy=False)

    def _row_bytes(self) -> int:
        return self._array.itemsize * math.prod(self.shape[1:])

    def _touched(self, key) -> int:
        """An upper bound of the bytes of the map that reading ``key`` may bring into the
        process: for an index array, the distinct :data:`FAULT_SPAN` blocks its rows lie in;
        for a row or a slice, the rows read plus two blocks per separate run of rows (the
        whole map where the rows are not contiguous in the file or the key is not one of the
        kinds below)."""
        whole = len(self._mapping.mapped)
        first = key[0] if isinstance(key, tuple) and key else key
        if self.ndim == 0 or not self._array.flags.c_contiguous:
            return whole
        if isinstance(first, (int, numpy.integer)):
            rows, runs = 1, 1
        elif isinstance(first, slice):
            start, stop, step = first.indices(len(self))
            rows = len(range(start, stop, step))
            runs = 1 if step == 1 else rows
        elif isinstance(first, (list, numpy.ndarray)):
            chosen = numpy.asarray(first)
            chosen = numpy.flatnonzero(chosen) if chosen.dtype == bool else chosen.reshape(-1)
            return min(whole, self._blocks(chosen % max(len(self), 1)))
        else:
            return whole
        return min(whole, rows * self._row_bytes() + runs * 2 * FAULT_SPAN)

    def _blocks(self, rows: numpy.ndarray) -> int:
        """The bytes of the :data:`FAULT_SPAN` blocks of the file that hold ``rows``: each
        distinct block counted once (a row longer than a block: every block it spans)."""
        size = self._row_bytes()
        start = self._mapping.offset + rows.astype(numpy.int64) * size
        first, last = start // FAULT_SPAN, (start + max(size, 1) - 1) // FAULT_SPAN
        if size <= FAULT_SPAN:
            return numpy.unique(numpy.concatenate([first, last])).size * FAULT_SPAN
        return int((last - first + 1).sum()) * FAULT_SPAN
