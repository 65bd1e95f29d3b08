"""Rendering for the results table: cells as CSV text, a GitHub Markdown table, a rich Table.

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


def markdown(title: str, header: list[str], rows: list[list[str]], captions: list[str]) -> str:
    """A Markdown section: the title in bold, a GitHub table of the (already formatted)
    cells, then each caption as its own line."""
    def line(cells):
        return "| " + " | ".join(_md_escape(cell) for cell in cells) + " |"

    lines = [f"**{_md_escape(title)}**", "", line(header), "|" + "---|" * len(header)]
    lines += [line(row) for row in rows]
    if captions:
        lines.append("")
        lines += [_md_escape(caption) + "  " for caption in captions]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def rich_table(title: str, header: list[str], rows: list[list[str]], right: set[str]) -> Table:
    """A rich Table of the (already formatted) cells; user text is escaped, the columns named
    in ``right`` (numbers) are right-aligned and never cut; on a narrow console the headers
    and the other cells fold onto more lines instead of losing their ends."""
    table = Table(title=escape(title), title_justify="left")
    for i, name in enumerate(header):
        widest = max((len(row[i]) for row in rows), default=0)
        table.add_column(escape(name), justify="right" if name in right else "left",
                         overflow="fold", min_width=widest if name in right else None)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table
