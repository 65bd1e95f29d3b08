"""``metrics.csv``: the rows as a table, one column per key."""

from __future__ import annotations

import csv
import io
import math
import numbers
from pathlib import Path

from trainer_run.storage import run_files

from ...storage import files
from .base import Logger, RunInfo

FILE = run_files.METRICS_CSV


class CsvTable(Logger):
    """Writes ``metrics.csv``: a header of the union of the rows' keys (in order of first
    appearance) and one line per row; a key a row lacks, or a NaN or infinite value, is an
    empty cell (as ``null`` in ``metrics.jsonl``). Floats are written in Python's shortest
    round-trip form, so they read back as the same numbers. A row that brings a new key (the
    first validation) rewrites the file atomically with the wider header; other rows are
    appended."""

    path: Path

    def __init__(self, delimiter: str = ",", run: RunInfo | None = None):
        super().__init__(run)
        self.delimiter = delimiter
        self.rows: list[dict] = []
        self.columns: list[str] = []

    def start(self, out: Path, rows: list[dict]) -> None:
        self.path = Path(out) / FILE
        self.rows = list(rows)
        self._rewrite()

    def write(self, row: dict) -> None:
        self.rows.append(row)
        if any(key not in self.columns for key in row):
            self._rewrite()
        else:
            files.append(self.path, self._lines([row]), run=self.path.parent)

    def _rewrite(self) -> None:
        self.columns = list(dict.fromkeys(key for row in self.rows for key in row))
        header = self._lines([dict(zip(self.columns, self.columns))]) if self.rows else ""
        files.write_atomic(self.path, header + self._lines(self.rows), run=self.path.parent)

    def _lines(self, rows: list[dict]) -> str:
        text = io.StringIO()
        writer = csv.writer(text, delimiter=self.delimiter, lineterminator="\n")
        writer.writerows([_cell(row.get(key)) for key in self.columns] for row in rows)
        return text.getvalue()


def _cell(value) -> str:
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value)) if math.isfinite(value) else ""
    return "" if value is None else str(value)
