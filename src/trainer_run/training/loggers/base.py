"""The base of the loggers: sinks of the rows :class:`~..extensions.LogReport` computes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

NOT_METRICS = ("iteration", "time")
"""Row keys that are no metric: the step and the wall-clock time."""


@dataclass
class RunInfo:
    """What a logger may know of the run besides its rows: the resolved ``config``, the
    :class:`~..extensions.Objective` (its ``metric`` and ``best``) and the
    :class:`~..extensions.HeldOutEvaluator` (its ``metrics``, the test split's
    ``test/<metric>``, and ``weights``, which weights they measured, once training completed:
    it finalizes before the loggers close; set on rank 0 when the evaluator is built), when
    there are."""

    config: dict = field(default_factory=dict)
    objective: object = None
    held_out: object = None


class Logger:
    """Receives every row of the log. :meth:`start` gets the run directory and all the rows
    logged so far (a resumed run's rows come from its checkpoint), from which it writes its
    files anew, so a resume neither repeats nor loses a row; :meth:`write` gets each new
    row; :meth:`close` runs when training ends, however it ends. Rows are plain mappings
    whose values may be NaN or infinite (the state keeps them)."""

    def __init__(self, run: RunInfo | None = None):
        self.run = run or RunInfo()

    def start(self, out: Path, rows: list[dict]) -> None:
        """Rewrites this logger's files in ``out`` from ``rows``."""

    def write(self, row: dict) -> None:
        """Adds one new row."""

    def close(self) -> None:
        """Training ended."""
