"""The base of the loggers: sinks of the rows :class:`~..extensions.LogReport` computes."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from pathlib import Path

NOT_METRICS = ("iteration", "time")
"""Row keys that are no metric: the step and the wall-clock time."""
HIDDEN = ("hydra", "resume")
"""Config sections that are no hyper-parameter of the run."""


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

    def hyperparameters(self) -> dict:
        """The run's hyper-parameters: every scalar of ``config`` under its dotted key (see
        :func:`flat`), the sections that are none (:data:`HIDDEN`) left out."""
        return {k: v for k, v in flat(self.config).items() if k.split(".")[0] not in HIDDEN}


class Logger:
    """Receives every row of the log. :meth:`start` gets the run directory and all the rows
    logged so far (a resumed run's rows come from its checkpoint), from which it writes its
    files anew, so a resume neither repeats nor loses a row; :meth:`write` gets each new
    row; :meth:`close` runs when training ends, however it ends, and :meth:`finish` once the
    run's summary is written (a logger that sends the run's files elsewhere sends them then).
    Rows are plain mappings whose values may be NaN or infinite (the state keeps them)."""

    def __init__(self, run: RunInfo | None = None):
        self.run = run or RunInfo()

    def start(self, out: Path, rows: list[dict]) -> None:
        """Rewrites this logger's files in ``out`` from ``rows``."""

    def write(self, row: dict) -> None:
        """Adds one new row."""

    def close(self) -> None:
        """Training ended."""

    def finish(self, status: str) -> None:
        """The run's files are final: ``summary.json`` is written, and ``status`` is how the run
        ended, as it says (``completed``, ``interrupted``, ``diverged`` or ``failed``). Called
        after :meth:`close`, once the summary is written, even when the run failed."""


def flat(config: dict, prefix: str = "") -> dict:
    """The scalars of ``config`` by dotted key; a list as its text, null as ``"null"``."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, f"{name}."))
        elif isinstance(value, (bool, str)) or is_number(value):
            out[name] = value
        else:
            out[name] = "null" if value is None else str(value)
    return out


def is_number(value) -> bool:
    """Whether ``value`` is a real number (a bool is not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
