"""Rich console output: a live progress bar while training and a metrics table at the end."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..extension import PRIORITY_READER, Extension


class ProgressBar(Extension):
    """Shows iteration, epoch, loss, lr, samples/s, ETA and the updater's ``status()``
    (loss scale, skipped steps) when it has one; refreshed every
    ``update_interval`` iterations (rendering is throttled by rich besides)."""

    priority = PRIORITY_READER - 1
    name = "progress_bar"

    def __init__(self, total_iterations: int, samples_per_update: int, optimizer=None,
                 update_interval: int = 10, console: Console | None = None):
        self.total = total_iterations
        self.samples_per_update = samples_per_update
        self.optimizer = optimizer
        self.update_interval = update_interval
        self.console = console or Console(stderr=True)
        self._progress = None
        self._task = None
        self._t0 = self._it0 = 0

    def initialize(self, trainer) -> None:
        self._progress = Progress(
            BarColumn(bar_width=20),
            TextColumn("it {task.completed}/{task.total}"),
            TextColumn("epoch {task.fields[epoch]:.2f}"),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("lr {task.fields[lr]}"),
            TextColumn("{task.fields[speed]} samples/s"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            transient=False,
        )
        iteration = trainer.updater.iteration
        self._task = self._progress.add_task("train", total=self.total, completed=iteration,
                                             epoch=trainer.updater.epoch_detail, loss="-", lr="-",
                                             speed="-", status=_status(trainer.updater))
        self._t0, self._it0 = time.perf_counter(), iteration
        self._progress.start()

    def __call__(self, trainer) -> None:
        iteration = trainer.updater.iteration
        if iteration % self.update_interval and iteration != self.total:
            return
        loss = trainer.observation.get("loss")
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        fields = {
            "epoch": trainer.updater.epoch_detail,
            "loss": "-" if loss is None else f"{float(loss):.4g}",
            "lr": "-" if self.optimizer is None else f"{self.optimizer.learning_rate:.3g}",
            "speed": f"{(iteration - self._it0) * self.samples_per_update / elapsed:,.0f}",
            "status": _status(trainer.updater),
        }
        self._progress.update(self._task, completed=iteration, **fields)

    def finalize(self, trainer) -> None:
        if self._progress is not None:
            self._progress.stop()


class MetricsTable(Extension):
    """At the end of training prints the logged rows as a rich table (at most ``max_rows``,
    evenly spaced, always including the last), with the test split's metrics below it when
    ``held_out`` (a :class:`~.held_out.HeldOutEvaluator`) has them."""

    priority = PRIORITY_READER - 2
    name = "metrics_table"

    def __init__(self, log_report, max_rows: int = 20, console: Console | None = None,
                 held_out=None):
        self.log_report = log_report
        self.held_out = held_out
        self.max_rows = max_rows
        self.console = console or Console()

    def finalize(self, trainer) -> None:
        rows = self.log_report.log
        if not rows:
            return
        if len(rows) > self.max_rows:
            step = len(rows) / self.max_rows
            rows = [rows[int(i * step)] for i in range(self.max_rows - 1)] + [rows[-1]]
        columns = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in ("elapsed_s", "time")]
        tested = self.held_out.metrics if self.held_out is not None else {}
        caption = "  ".join(f"{k} {_cell(v)}" for k, v in sorted(tested.items()))
        table = Table(title=f"metrics ({trainer.status})", caption=caption or None)
        for column in columns:
            table.add_column(column.replace("/", "\n"), justify="right")
        for row in rows:
            table.add_row(*(_cell(row.get(c)) for c in columns))
        self.console.print(table)


def _status(updater) -> str:
    values = updater.status()
    return " ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in values.items())


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"
