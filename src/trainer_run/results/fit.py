"""A table of text cells fitted to a width: which columns are shown, where, and how wide.

The functions here know nothing of runs (like :mod:`.table`): they take :class:`Column` s of
already formatted cells and decide, without drawing anything,

- which columns say the same for every row (:func:`constant`): those are named once above
  the table instead of repeated on each line;
- how a header wraps (:func:`header`): after ``/``, ``_`` or ``.`` and at spaces, so
  ``val/accuracy`` over six-character numbers takes two short lines, not one wide column;
- each column's width and, when the columns do not fit side by side, what gives way
  (:func:`fit`): first the override columns become one ``overrides`` column whose
  ``key=value`` words wrap, then metric columns move, whole, into a continuation table that
  repeats the row's number and name. A number is never folded and no column is cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

BORDER = 3
"""Characters each column adds to a table line besides its cells (a rule and two spaces)."""
FLOOR = 16
"""The narrowest a text column is made before metric columns move out (its cells fold)."""
OVERRIDES_FLOOR = 24
"""The narrowest the merged ``overrides`` column is made."""
HEADER_WORD = 8
"""A header word this long or shorter stays on one line even over narrower cells."""
MERGED = "overrides"


@dataclass
class Column:
    """One column: its ``name`` (the header) and ``cells`` (one per row). ``right``: a number,
    right-aligned and never folded; ``kept``: shown even when constant (the ranking value);
    ``key``: names the row (its number, its job), kept and repeated in a continuation table;
    ``override``: one override key's values, merged with the other override columns into one
    when narrow; ``movable``: may move into a continuation table. ``width`` is what
    :func:`fit` chose (0 before)."""

    name: str
    cells: list[str] = field(default_factory=list)
    right: bool = False
    kept: bool = False
    key: bool = False
    override: bool = False
    movable: bool = False
    width: int = 0


def constant(columns: list[Column]) -> tuple[list[Column], list[tuple[str, str]]]:
    """The columns that differ between rows, and ``(name, value)`` for each column (neither
    ``kept`` nor a ``key``) whose cells are all the same, in order; a column empty in every row is dropped
    without a pair. With fewer than two rows every column is kept."""
    rows = len(columns[0].cells) if columns else 0
    if rows < 2:
        return list(columns), []
    shown, same = [], []
    for column in columns:
        if column.kept or column.key or len(set(column.cells)) > 1:
            shown.append(column)
        elif column.cells[0]:
            same.append((column.name, column.cells[0]))
    return shown, same


def header(name: str, width: int) -> str:
    """``name`` wrapped into lines of at most ``width`` characters where it can break: at
    spaces (which go), else after ``/``, ``_`` or ``.``; a piece longer than ``width`` stays
    whole."""
    lines, current = [], ""
    for word in name.split():
        if current and len(current) + 1 + len(word) <= width:
            current += " " + word
            continue
        if current:
            lines.append(current)
            current = ""
        for piece in _pieces(word):
            if current and len(current) + len(piece) > width:
                lines.append(current)
                current = ""
            current += piece
    return "\n".join([*lines, current] if current else lines)


def _pieces(word: str) -> list[str]:
    """``word`` cut after each run of ``/``, ``_`` or ``.``: ``val/loss`` -> ``val/``, ``loss``."""
    return re.findall(r"[^/_.]*[/_.]+|[^/_.]+", word)


def natural(column: Column, wrapped: bool = True) -> int:
    """The width a column takes with no cell folded: its widest cell or, when not
    ``wrapped``, its whole header, whichever is wider; a ``wrapped`` header takes its longest
    unbreakable piece, or its longest word up to :data:`HEADER_WORD`."""
    widest = max((len(cell) for cell in column.cells), default=0)
    if not wrapped:
        return max(widest, len(column.name), 1)
    words = column.name.split() or [""]
    pieces = [piece for word in words for piece in _pieces(word)] or [""]
    return max(widest, max(map(len, pieces)), min(max(map(len, words)), HEADER_WORD), 1)


def floor(column: Column) -> int:
    """The narrowest a column is made: a number's natural width (never folded); a text
    column's up to :data:`FLOOR` (:data:`OVERRIDES_FLOOR` for the merged overrides)."""
    if column.right:
        return natural(column)
    return min(natural(column), OVERRIDES_FLOOR if column.name == MERGED else FLOOR)


def table_width(widths: list[int]) -> int:
    """The characters a table line takes with columns of these widths, borders included."""
    return sum(widths) + BORDER * len(widths) + 1


def merge_overrides(columns: list[Column]) -> list[Column]:
    """The override columns (two or more) replaced, where the first one stood, by one
    ``overrides`` column of ``key=value`` words (an empty value left out); else ``columns``."""
    keys = [c for c in columns if c.override]
    if len(keys) < 2:
        return list(columns)
    cells = [" ".join(f"{c.name}={c.cells[i]}" for c in keys if c.cells[i])
             for i in range(len(keys[0].cells))]
    merged = Column(MERGED, cells)
    first = columns.index(keys[0])
    rest = [c for c in columns if not c.override]
    return rest[:first] + [merged] + rest[first:]


def fit(columns: list[Column], width: int, last_first: bool = False) -> list[list[Column]]:
    """The tables to print, each a list of columns with their ``width`` set, the first holding
    every column that is not moved. Side by side with whole headers when that fits in
    ``width``, else with wrapped headers (:func:`natural`). Else the text columns narrow
    towards their :func:`floor`, the override columns merged into one where that is narrower
    (:func:`merge_overrides`), and while even that does not fit, the ``movable`` columns move,
    leftmost first (``last_first``: rightmost first, so the first table keeps the leftmost),
    into continuation tables, in their order, that repeat the ``key`` columns (the row's
    number and name)."""
    for wrapped in (False, True):
        if table_width([natural(c, wrapped) for c in columns]) <= width:
            return [[replace(c, width=natural(c, wrapped)) for c in columns]]
    first = min(merge_overrides(columns), list(columns), key=_narrowest)
    moved = []
    while _narrowest(first) > width and any(c.movable for c in first):
        out = next(c for c in (reversed(first) if last_first else first) if c.movable)
        first.remove(out)
        moved.append(out)
    if last_first:
        moved.reverse()
    tables = [first]
    for column in moved:
        if len(tables) == 1 or _narrowest(tables[-1] + [column]) > width:
            tables.append([c for c in first if c.key])
        tables[-1].append(column)
    return [_widths(table, width) for table in tables]


def _narrowest(columns: list[Column]) -> int:
    """The width of a table of these columns at their floors."""
    return table_width([floor(c) for c in columns])


def _widths(columns: list[Column], width: int) -> list[Column]:
    """``columns`` with widths that fill at most ``width`` where their floors allow: numbers
    at their natural width, each text column at its floor plus a share of what is left, up
    to its natural width (the ones that need least first, so the others share the rest)."""
    text = [c for c in columns if not c.right]
    chosen = {id(c): floor(c) for c in text}
    spare = width - _narrowest(columns)
    for i, column in enumerate(sorted(text, key=lambda c: natural(c) - floor(c))):
        more = min(natural(column) - floor(column), max(spare, 0) // (len(text) - i))
        chosen[id(column)] += more
        spare -= more
    return [replace(c, width=natural(c) if c.right else chosen[id(c)]) for c in columns]
