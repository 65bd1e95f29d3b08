"""TensorBoard event files under ``<run>/tensorboard/``, written with tensorboardX."""

from __future__ import annotations

import math
import numbers
import os
import time
from datetime import datetime
from pathlib import Path

from ...errors import ConfigError
from .base import NOT_METRICS, Logger

try:
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams
except ImportError:
    raise ConfigError('logger=tensorboard needs tensorboardX: pip install "trainer-run[tensorboard]"'
                      ) from None

FOLDER = "tensorboard"
HIDDEN = ("hydra", "resume")
"""Config sections that are no hyper-parameter of the run."""


class TensorBoard(Logger):
    """Writes every numeric value of every row as a scalar (tag: the row's key, step: its
    ``iteration``, wall time: its ``time``), and the run's hyper-parameters for TensorBoard's
    HParams view: every scalar of the resolved config under its dotted key (a list as its
    text), compared on the objective's metric and ``best/<metric>``, the objective's best
    value, written when training ends. :meth:`start` writes a new event file from the rows
    so far, then removes the older ones, so a resumed run holds each row once."""

    last: int | None = None  # the iteration of the latest row

    def start(self, out: Path, rows: list[dict]) -> None:
        folder = Path(out) / FOLDER
        old = list(folder.glob("events.out.tfevents.*"))
        self.writer = SummaryWriter(logdir=str(folder),
                                    filename_suffix=f".{os.getpid()}.{time.time_ns()}")
        self._write_hparams()
        for row in rows:
            self._scalars(row)
        self.writer.flush()
        for path in old:
            path.unlink(missing_ok=True)

    def write(self, row: dict) -> None:
        self._scalars(row)
        self.writer.flush()

    def close(self) -> None:
        objective = self.run.objective
        if objective is not None and objective.best is not None:
            step = objective.best_iteration if self.last is None else self.last
            self.writer.add_scalar(f"best/{objective.metric}", objective.best, step)
        self.writer.close()

    def _scalars(self, row: dict) -> None:
        step = row.get("iteration")
        stamp = row.get("time")
        walltime = datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
        for key, value in row.items():
            if key not in NOT_METRICS and _is_number(value):
                self.writer.add_scalar(key, float(value), step, walltime=walltime)
        self.last = step

    def _write_hparams(self) -> None:
        values = {k: v for k, v in flat(self.run.config).items() if k.split(".")[0] not in HIDDEN}
        objective = self.run.objective
        metrics = {} if objective is None else {objective.metric: math.nan,
                                                 f"best/{objective.metric}": math.nan}
        for summary in hparams(values, metrics):
            self.writer.file_writer.add_summary(summary)


def flat(config: dict, prefix: str = "") -> dict:
    """The scalars of ``config`` by dotted key; a list as its text, null as ``"null"``."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, f"{name}."))
        elif isinstance(value, (bool, str)) or _is_number(value):
            out[name] = value
        else:
            out[name] = "null" if value is None else str(value)
    return out


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
