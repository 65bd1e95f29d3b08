"""Rendering for the results table: cells as CSV text, a GitHub Markdown table, a rich Table
of columns fitted to a width (:mod:`.fit`).

The functions here know nothing of runs: they take a header and rows of cells (numbers,
strings or None) built by :mod:`trainer_run.results`. An empty cell stands for a missing
or null value everywhere.
"""

from __future__ import annotations

import csv
import io
import numbers

from rich.markup import escape
from rich.table import Table

from .fit import Column, header


def csv_cell(value) -> str:
    """A value as one CSV cell: '' for None, floats at full ``repr`` precision, ints as such."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    return str(value)


def csv_text(header: list[str], rows: list[list]) -> str:
    """The header and rows as CSV text (each cell through :func:`csv_cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return out.getvalue()


def short(value) -> str:
    """A value for a person to read: '' for None, floats to 4 significant digits."""
    if value is None:
        return ""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        return f"{float(value):.4g}"
    return str(value)


def duration(seconds) -> str:
    """Elapsed time as ``12.3s``, ``4m05s`` or ``1h02m``; '' when unknown."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(round(seconds))
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def markdown(title: str, header: list[str], rows: list[list[str]], captions: list[str],
             above: list[str] = ()) -> str:
    """A Markdown section: the title in bold, the lines ``above`` the table, a GitHub table
    of the (already formatted) cells, then each caption as its own line."""
    def line(cells):
        return "| " + " | ".join(_md_escape(cell) for cell in cells) + " |"

    lines = [f"**{_md_escape(title)}**", ""]
    if above:
        lines += [_md_escape(text) + "  " for text in above] + [""]
    lines += [line(header), "|" + "---|" * len(header)]
    lines += [line(row) for row in rows]
    if captions:
        lines.append("")
        lines += [_md_escape(caption) + "  " for caption in captions]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def rich_table(columns: list[Column], title: str | None = None) -> Table:
    """A rich Table of fitted columns (:func:`.fit.fit`): each exactly its ``width``, its
    header wrapped to it (:func:`.fit.header`), numbers right-aligned and never folded, user
    text escaped and folded onto more lines where longer than its column."""
    table = Table(title=escape(title) if title else None, title_justify="left")
    for column in columns:
        table.add_column(escape(header(column.name, column.width)),
                         justify="right" if column.right else "left", overflow="fold",
                         no_wrap=column.right, width=column.width)
    for cells in zip(*(column.cells for column in columns)):
        table.add_row(*(escape(cell) for cell in cells))
    return table
