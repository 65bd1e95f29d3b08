"""The fast path of :mod:`.csv_files` for tables of plain numbers.

A table whose every cell is a plain ASCII number (no quotes, no empty cells, no underscores,
``\\n`` or ``\\r\\n`` line ends) is parsed block by block with NumPy's C parser
(``numpy.loadtxt``) straight into a preallocated float32 array of the features and an int64
(else float64) array of the target: the peak is those arrays plus one block of text. The
values are bit for bit those of the general path (both read each cell as the nearest double,
then round the features to float32).

Anything else, and any table the general path would reject, makes :func:`numeric_table`
answer None and the general path reads the table, with today's rules and messages.
"""

from __future__ import annotations

import csv as csv_module
import io
import warnings

import numpy

from ..errors import ConfigError

BLOCK = 1 << 20  # bytes of text parsed at a time (small enough to stay in cache)
DELIMITERS = ",;|\t"
BOM = b"\xef\xbb\xbf"


def numeric_table(path, header, delimiter: str, choose) -> tuple | None:
    """``((x, y), columns)`` of the table at ``path`` read by the fast path, else None.

    ``choose(names, first_row)`` gives the ``(features, target)`` positions (it may raise
    ConfigError: then None too). ``x`` is float32, ``y`` int64 when every target cell is an
    integer within int64, else float64.
    """
    if delimiter not in DELIMITERS or len(delimiter) != 1:
        return None
    try:
        with open(path, "rb") as f:
            start = _start(f.read(BLOCK), header, delimiter)
            columns = start and _usable(choose, *start[:2])
            if not columns:
                return None
            return _parse(f, start[2], len(start[1]), columns, delimiter), columns
    except (OSError, _NotPlain):
        return None


def _usable(choose, names, first: list[str]) -> tuple | None:
    """The ``(features, target)`` positions when the fast path can read them (a header as wide
    as the first row, the columns within it and each once, a number as its target), else None."""
    if names is not None and len(names) != len(first):
        return None  # the general path's message names the row
    try:
        chosen, label = choose(names, first)
    except ConfigError:
        return None
    if max(chosen + [label]) >= len(first) or len(set(chosen)) < len(chosen) \
            or not is_number(first[label]):
        return None
    return chosen, label


class _NotPlain(Exception):
    """A block holds something the fast path leaves to the general path."""


def _start(head: bytes, header, delimiter: str) -> tuple | None:
    """The column names (or None), the first data row's cells and the byte offset of the data."""
    skip = len(BOM) if head.startswith(BOM) else 0
    lines, position = [], skip
    while len(lines) < 2:
        end = head.find(b"\n", position)
        if end < 0:
            return None
        if head[position:end].rstrip(b"\r"):
            lines.append((position, end + 1))
        position = end + 1
    texts = [head[a:b] for a, b in lines]
    if not all(t.count(b"\r") == t.count(b"\r\n") for t in texts) or texts[0].count(b'"') % 2:
        return None
    try:  # names may be any UTF-8 (the data blocks are checked to be ASCII)
        rows = [next(csv_module.reader([t.decode()], delimiter=delimiter)) for t in texts]
    except UnicodeDecodeError:
        return None
    if header == "auto":
        header = looks_like_header(*rows)
    if header:
        return rows[0], rows[1], lines[0][1]
    return None, rows[0], skip


def looks_like_header(first: list[str], second: list[str]) -> bool:
    """Whether ``first`` names the columns of ``second``: a cell that is no number above one
    that is (``dataset.header=auto``)."""
    return any(not is_number(a) and is_number(b) for a, b in zip(first, second))


def is_number(cell: str) -> bool:
    """Whether ``float`` reads ``cell``."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _parse(f, offset: int, width: int, columns, delimiter: str) -> tuple:
    """The features (float32) and the target of the rows from ``offset`` on, block by block."""
    chosen, label = columns
    rows = _count_lines(f, offset)
    x = numpy.empty((rows, len(chosen)), numpy.float32)
    y = numpy.empty(rows, numpy.int64)
    f.seek(offset)
    n, rest = 0, b""
    while True:
        block = f.read(BLOCK)
        text, rest = (rest + block, b"") if not block else _split(rest + block)
        if text:
            records, y = _block(_checked(text), width, columns, y, delimiter)
            k = len(records)
            if n + k > len(x):  # the file grew since its lines were counted
                raise _NotPlain
            x[n:n + k] = numpy.ndarray((k, len(chosen)), numpy.float32, records, 0,
                                       (records.itemsize, 4))
            y[n:n + k] = records[f"c{label}"]
            n += k
        if not block:
            break
    if n == 0:
        raise _NotPlain
    return x[:n], y[:n]


def _count_lines(f, offset: int) -> int:
    """How many lines start at or after ``offset`` (an upper bound of the rows)."""
    f.seek(offset)
    count, last = 0, b"\n"
    while block := f.read(BLOCK):
        count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


def _split(text: bytes) -> tuple[bytes, bytes]:
    """``text`` up to its last line end, and the rest."""
    end = text.rfind(b"\n") + 1
    return text[:end], text[end:]


def _checked(text: bytes) -> bytes:
    """The block, if it holds nothing the fast path leaves to the general path."""
    if (not text.isascii() or b'"' in text or b"_" in text or b"\x00" in text
            or b"\r" in text and text.count(b"\r") != text.count(b"\r\n")):
        raise _NotPlain
    return text


def _block(text: bytes, width: int, columns, y, delimiter: str):
    """The block's rows as records, and ``y``, made float64 once a target cell is no integer
    within int64 (then this block's and the later targets are floats)."""
    for kind in (y.dtype, numpy.float64) if y.dtype.kind == "i" else (y.dtype,):
        try:
            records = _records(text, _layout(width, columns, kind), delimiter)
        except ValueError:
            continue
        return records, y if kind == y.dtype else y.astype(numpy.float64)
    raise _NotPlain


def _layout(width: int, columns, kind) -> numpy.dtype:
    """Records of ``width`` fields ``c0``, ``c1``...: the features first, side by side as
    float32 in their chosen order, then the target as ``kind``, then the other columns."""
    chosen, label = columns
    order = chosen + [label] + [i for i in range(width) if i != label and i not in chosen]
    formats, offsets, at = {}, {}, 0
    for i in order:
        formats[i] = numpy.dtype(kind if i == label else numpy.float32)
        offsets[i], at = at, at + formats[i].itemsize
    return numpy.dtype({"names": [f"c{i}" for i in range(width)], "itemsize": at,
                        "formats": [formats[i] for i in range(width)],
                        "offsets": [offsets[i] for i in range(width)]})


def _records(text: bytes, layout: numpy.dtype, delimiter: str) -> numpy.ndarray:
    """The rows of ``text`` as records of ``layout``; ValueError for a cell that is not one
    (an integer field holding a float too: older NumPy parse it with a DeprecationWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)  # a block of empty lines
        try:
            return _c_reader(text, layout, delimiter)
        except DeprecationWarning as e:
            raise ValueError(e) from None


def _c_reader(text: bytes, layout: numpy.dtype, delimiter: str) -> numpy.ndarray:
    """NumPy's C reader (``numpy.loadtxt``) on the block's lines (a BytesIO shares ``text``;
    each line is decoded as it is read)."""
    return numpy.loadtxt(io.BytesIO(text), dtype=layout, delimiter=delimiter, comments=None,
                         quotechar=None, ndmin=1, encoding="ascii")
