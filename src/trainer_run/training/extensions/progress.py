"""What a person sees while a run trains: a live bar on a terminal, one plain line per log
interval otherwise (a batch log, ``nohup``, CI), and the table of logged rows at the end.

The bar and the lines show the same :class:`Readout`: iteration and epoch, the training loss
as the log rows define it (``train/loss``: the mean since the previous row), the latest
validation value of the objective's metric and its best so far, the learning rate, samples
per second, elapsed time (the log's clock: from the job's start, a resumed run's earlier
sessions included) and the time left."""

from __future__ import annotations

import dataclasses
import functools
import time

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ... import averaging
from ...results import fit
from ...results import table as render
from ..extension import PRIORITY_READER, Extension

AVERAGED = tuple(averaging.prefix("", kind)[1:] for kind in (averaging.EMA, averaging.SWA))
"""How the name of an averaged weights' metric begins after its split: ``ema/``, ``swa/``."""


class Readout:
    """The numbers of the run so far, as labelled text. ``log_report`` gives the training loss
    and the validation values (its rows), ``objective`` the best value, ``optimizer`` the
    learning rate; samples per second and the time left are this session's rates."""

    def __init__(self, total: int, samples_per_update: int, log_report, objective=None,
                 optimizer=None):
        self.total, self.samples_per_update = total, samples_per_update
        self.log_report, self.objective, self.optimizer = log_report, objective, optimizer
        self._t0 = self._it0 = 0
        self._trainer = None

    @property
    def started(self) -> bool:
        return self._trainer is not None

    def start(self, trainer) -> None:
        self._trainer = trainer
        self._t0, self._it0 = time.perf_counter(), trainer.updater.iteration

    def progress(self) -> list[tuple[str, str]]:
        """Where the run is: iteration, epoch, speed, elapsed and time left."""
        updater = self._trainer.updater
        iteration = updater.iteration
        rate = (iteration - self._it0) / max(time.perf_counter() - self._t0, 1e-9)
        left = (self.total - iteration) / rate if rate > 0 else None
        return [("it", f"{iteration}/{self.total}"), ("epoch", f"{updater.epoch_detail:.2f}"),
                ("samples/s", f"{rate * self.samples_per_update:,.0f}" if rate > 0 else "-"),
                ("elapsed", _clock(self.log_report.elapsed_s)), ("ETA", _clock(left))]

    def metrics(self) -> list[tuple[str, str]]:
        """How the run does: the last row's training loss, the objective's latest and best
        values (as the objective read them at evaluations), the learning rate and the
        updater's status (loss scale, skips)."""
        fields = []
        loss = self.log_report.latest_of("train/loss")
        if loss is not None:
            fields.append(("train/loss", _number(loss)))
        fields += self._objective()
        if self.optimizer is not None:
            fields.append(("lr", f"{self.optimizer.learning_rate:.3g}"))
        fields += [(k.replace("_", " "), f"{v:g}") for k, v in self._trainer.updater.readings().items()]
        return fields

    def _objective(self) -> list[tuple[str, str]]:
        objective = self.objective
        if objective is None:
            return []
        fields = []
        if objective.final is not None and objective.metric != "train/loss":
            fields.append((objective.metric, _number(objective.final)))
        if objective.best is not None:
            fields.append((f"best {objective.metric}",
                           f"{_number(objective.best)} @{objective.best_iteration}"))
        return fields

    def line(self) -> str:
        return "  ".join(f"{k} {v}" for k, v in [*self.progress(), *self.metrics()])


class Progress(Extension):
    """Shows the :class:`Readout` as a live bar when ``live`` and the console is a terminal
    (refreshed every ``update_interval`` iterations and, for the clock, 4 times a second), and
    otherwise as one plain line at each log point (no control characters,
    flushed at once). A reader registered after the :class:`~.log_report.LogReport` (it shows
    the row logged in the same iteration) and before the :class:`MetricsTable` (its bar stops
    before the table is printed)."""

    priority = PRIORITY_READER
    name = "progress"

    def __init__(self, readout: Readout, live: bool = True, update_interval: int = 10,
                 console: Console | None = None):
        self.readout = readout
        self.console = console or Console(emoji=False)
        self.live = live and self.console.is_terminal
        self.update_interval = update_interval
        self._live = None
        self._ratio = 0.0

    def initialize(self, trainer) -> None:
        self.readout.start(trainer)
        self._ratio = trainer.updater.iteration / max(self.readout.total, 1)
        if self.live:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False,
                              get_renderable=self._render)
            self._live.start()

    def __call__(self, trainer) -> None:
        iteration = trainer.updater.iteration
        if self._live is not None:
            if iteration % self.update_interval == 0 or iteration == self.readout.total:
                self._ratio = iteration / max(self.readout.total, 1)
        elif self.readout.log_report.point == iteration:
            print(self.readout.line(), file=self.console.file, flush=True)

    def _render(self) -> Group:
        if not self.readout.started:
            return Group()
        top = Table.grid(padding=(0, 2))
        progress = self.readout.progress()
        top.add_row(ProgressBar(total=1.0, completed=self._ratio, width=24),
                    *(Text(f"{k} {v}") for k, v in progress))
        bottom = Text("  ".join(f"{k} {v}" for k, v in self.readout.metrics()))
        return Group(top, bottom)

    def finalize(self, trainer) -> None:
        if self._live is not None:
            self._ratio = trainer.updater.iteration / max(self.readout.total, 1)
            self._live.stop()
            self._live = None


class MetricsTable(Extension):
    """At the end of training prints the logged rows as a table within the console's width:
    every evaluation row (one with ``val/`` values) and the last, and when there are more than
    ``max_rows`` rows, the training-only rows thinned to evenly spaced ones (a note says how
    many are shown); the test split's metrics below it, with the weights they were measured
    with (``best EMA weights`` when the objective ranked the EMA's), when ``held_out`` (a
    :class:`~.held_out.HeldOutEvaluator`) has them. The columns of keys ``leave_out`` says
    (per-class values: one per class would crowd the table out) are left to
    ``metrics.jsonl``, and a note says so.

    The table is fitted as ``trainer-report``'s is (:func:`trainer_run.results.fit.fit`): a
    column holding one value in every row that logs it (at least two) is said once above it
    (:func:`_constant`), headers wrap after ``/``,
    ``_`` and ``.``, and the metric columns that do not fit move, whole, into continuation
    tables that repeat the iteration; no number or header is ever cut. A reader registered
    after the :class:`Progress` (the table comes after the bar stops)."""

    priority = PRIORITY_READER
    name = "metrics_table"

    def __init__(self, log_report, max_rows: int = 20, console: Console | None = None,
                 held_out=None, leave_out=None):
        self.log_report = log_report
        self.held_out = held_out
        self.leave_out = leave_out or (lambda key: False)
        self.max_rows = max_rows
        self.console = console or Console(emoji=False)

    def finalize(self, trainer) -> None:
        rows, note = kept_rows(self.log_report.log, self.max_rows)
        if not rows:
            return
        keys = sorted((k for k in dict.fromkeys(k for row in rows for k in row)
                       if k not in ("elapsed_s", "time")), key=_column_order)
        names = [k for k in keys if not self.leave_out(k)]
        if len(names) < len(keys):
            note = "; ".join(n for n in (note, "per-class values: metrics.jsonl") if n)
        columns = [fit.Column(name, [_cell(row.get(name)) for row in rows], right=True,
                              key=name == "iteration", movable=name != "iteration")
                   for name in names]
        shown, same = _constant(columns)
        say = functools.partial(self.console.print, highlight=False, markup=False)
        say(f"metrics ({trainer.status})")
        if same:
            say("all rows: " + "  ".join(f"{name} {value}" for name, value in same))
        for i, table in enumerate(fit.fit(shown, self.console.width, last_first=True)):
            self.console.print(render.rich_table(table, "(continued)" if i else None))
        for line in (note, self._tested()):
            if line:
                say(line)

    def _tested(self) -> str:
        """The line of the test split's metrics and the weights they measured ('' without)."""
        tested = self.held_out.metrics if self.held_out is not None else {}
        if not tested:
            return ""
        weights = self.held_out.weights
        averaged = f"{weights['averaged'].upper()} " if weights.get("averaged") else ""
        return (f"{weights['checkpoint']} {averaged}weights (iteration {weights['iteration']}): "
                + "  ".join(f"{k} {_cell(v)}" for k, v in sorted(tested.items())
                            if not self.leave_out(k)))


def _constant(columns: list) -> tuple[list, list[tuple[str, str]]]:
    """:func:`trainer_run.results.fit.constant` over the columns, a column's empty cells (a
    row that does not log its key: the learning rate in an evaluation's row) taken as its
    value when it logs one value at least twice; the columns shown keep their empty cells."""
    def filled(column):
        logged = [cell for cell in column.cells if cell]
        if len(logged) < 2 or len(set(logged)) > 1:
            return column
        return dataclasses.replace(column, cells=[logged[0]] * len(column.cells))

    kept, same = fit.constant([filled(c) for c in columns])
    by_name = {c.name: c for c in columns}
    return [by_name[c.name] for c in kept], same


def _column_order(key: str) -> tuple:
    """The table's columns in the order a reader looks for them (the last move out first
    when the table is too wide): iteration, epoch, the losses, the other training and
    validation metrics, those of averaged weights, then the rest (the learning rate)."""
    if key in ("iteration", "epoch"):
        return (0, key != "iteration")
    name = key.partition("/")[2]
    averaged = name.startswith(AVERAGED)
    loss = name.rpartition("/")[2] == "loss"
    if key.startswith("train/") or key.startswith("val/") and not averaged:
        return (1, not loss, not key.startswith("train/"))
    return (2, name.partition("/")[0], not loss) if averaged else (3,)


def kept_rows(rows: list[dict], max_rows: int) -> tuple[list[dict], str]:
    """The rows of the final table and a note on those left out: all of them when there are
    at most ``max_rows`` or all are evaluation rows; else every evaluation row, the last row,
    and evenly spaced training-only rows to fill ``max_rows``."""
    evaluated = {i for i, row in enumerate(rows) if any(k.startswith("val/") for k in row)}
    keep = evaluated | {len(rows) - 1}
    others = [i for i in range(len(rows)) if i not in keep]
    if len(rows) <= max_rows or not others:
        return list(rows), ""
    room = max(max_rows - len(keep), 0)
    if room:
        step = len(others) / room
        keep |= {others[int(j * step)] for j in range(room)}
    shown = len(keep) - len(evaluated | {len(rows) - 1})
    note = (f"every evaluation row; {shown} of {len(others)} training-only rows shown "
            "(all rows: metrics.jsonl)")
    return [rows[i] for i in sorted(keep)], note


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _number(value) -> str:
    return "nan" if value is None else f"{float(value):.4g}"


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"
