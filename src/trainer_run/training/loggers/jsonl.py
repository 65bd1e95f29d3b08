"""``metrics.jsonl``: one strict-JSON object per row."""

from __future__ import annotations

from pathlib import Path

from trainer_run.storage import run_files

from ...storage import files, strict_json
from .base import Logger

FILE = run_files.METRICS


class JsonLines(Logger):
    """Writes each row as one line of strict JSON (a NaN or infinite value is ``null``) to
    ``metrics.jsonl``; :meth:`start` replaces the file atomically with the rows so far. A
    refused write raises :class:`~trainer_run.errors.StorageError` naming the file."""

    path: Path

    def start(self, out: Path, rows: list[dict]) -> None:
        self.path = Path(out) / FILE
        files.write_atomic(self.path, "".join(strict_json.dumps(row) + "\n" for row in rows),
                          run=out)

    def write(self, row: dict) -> None:
        files.append(self.path, strict_json.dumps(row) + "\n", run=self.path.parent)
