"""TensorBoard event files under ``<run>/tensorboard/``: tensorboardX's records, our writes."""

from __future__ import annotations

import math
import os
import socket
import struct
import time
from datetime import datetime
from pathlib import Path

from trainer_run.storage import run_files

from ...errors import ConfigError
from ...storage import files
from .base import NOT_METRICS, Logger, is_number

try:
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import masked_crc32c
    from tensorboardX.summary import hparams, scalar
except ImportError:
    raise ConfigError('logger=tensorboard needs tensorboardX: pip install "trainer-run[tensorboard]"'
                      ) from None

FOLDER = run_files.TENSORBOARD


class TensorBoard(Logger):
    """Writes every numeric value of every row as a scalar (tag: the row's key, step: its
    ``iteration``, wall time: its ``time``), and the run's hyper-parameters for TensorBoard's
    HParams view (:meth:`~.base.RunInfo.hyperparameters`: the config's scalars under their
    dotted keys, a list as its text, internal keys left out, a value written with a resolver
    such as ``${oc.env:TOKEN}`` as written, never its value), compared on the objective's
    metric and ``best/<metric>``, the objective's best value, written when training ends.
    :meth:`start` writes a new event file from the rows so far (atomically), then removes the
    older ones, so a resumed run holds each row once.

    tensorboardX makes the events; the records are written here, without its background
    thread: each row's events are one :func:`trainer_run.storage.files.append`, whole or not at all,
    and a disk that refuses is one :class:`~trainer_run.errors.StorageError` naming the
    event file (no traceback from a thread or at exit)."""

    last: int | None = None  # the iteration of the latest row
    path: Path

    def start(self, out: Path, rows: list[dict]) -> None:
        folder = Path(out) / FOLDER
        files.make_folder(folder, out)
        old = list(folder.glob("events.out.tfevents.*"))
        self.path = folder / (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
                              f".{os.getpid()}.{time.time_ns()}")
        events = [Event(wall_time=time.time(), file_version="brain.Event:2"), *self._hparams()]
        events += [event for row in rows for event in self._scalars(row)]
        files.write_atomic(self.path, records(events), run=out)
        for path in old:
            path.unlink(missing_ok=True)

    def write(self, row: dict) -> None:
        files.append(self.path, records(self._scalars(row)), run=self.path.parent)

    def close(self) -> None:
        objective = self.run.objective
        if objective is not None and objective.best is not None:
            step = objective.best_iteration if self.last is None else self.last
            summary = scalar(f"best/{objective.metric}", float(objective.best))
            files.append(self.path, records([_event(summary, step)]), run=self.path.parent)

    def _scalars(self, row: dict) -> list:
        step = row.get("iteration")
        stamp = row.get("time")
        walltime = datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
        self.last = step
        return [_event(scalar(key, float(value)), step, walltime) for key, value in row.items()
                if key not in NOT_METRICS and is_number(value)]

    def _hparams(self) -> list:
        values = self.run.hyperparameters()
        objective = self.run.objective
        metrics = {} if objective is None else {objective.metric: math.nan,
                                                 f"best/{objective.metric}": math.nan}
        return [_event(summary) for summary in hparams(values, metrics)]


def _event(summary, step: int | None = None, walltime: float | None = None):
    """An Event holding ``summary`` at ``step`` and ``walltime`` (default: now)."""
    event = Event(summary=summary, wall_time=time.time() if walltime is None else walltime)
    if step is not None:
        event.step = int(step)
    return event


def records(events: list) -> bytes:
    """``events`` as TFRecord bytes: length, its masked CRC-32C, the event, its masked CRC-32C."""
    out = []
    for event in events:
        data = event.SerializeToString()
        header = struct.pack("Q", len(data))
        out += [header, struct.pack("I", masked_crc32c(header)), data,
                struct.pack("I", masked_crc32c(data))]
    return b"".join(out)

