"""The ranked runs as a person and files read them: the console's table, ``results.csv``,
``results.md`` and ``results_by_seed.csv``.

:func:`show` prints the table fitted to the console's width (:mod:`.fit`): what every run
shares, the overrides and the columns that hold one value for all, is said once above it
(``all runs: ...``); long names wrap and no column is cut. :func:`write` writes the files
with every column. The title says ``sweep results`` for the jobs of sweeps, ``run`` or
``runs`` for run folders (:func:`title`).
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..storage.files import write_atomic
from . import table as render
from .fit import Column, constant, fit
from .folders import Row
from .runs import (
    SeedGroup,
    by_seed,
    common,
    metric_names,
    objectives,
    override_key,
    override_value,
    rank,
    short_keys,
    value_text,
    varying,
)

CSV = "results.csv"
"""The ranked rows as CSV, written into the sweep's (or the report's) folder."""
MARKDOWN = "results.md"
"""The ranked rows as a Markdown table, every column."""
BY_SEED_CSV = "results_by_seed.csv"
"""The seed groups as CSV, when runs differ only by seed."""
LOG_WIDTH = 200
"""The width of a table written to a file or pipe when ``COLUMNS`` does not say one."""
SAID = {"at iter": "best at iteration"}
"""How a constant column is named above the table, where its header would read oddly."""


# -- words ---------------------------------------------------------------------------------

def kind(rows: list[Row]) -> str:
    """What the rows are: ``sweep results`` when each was read from a sweep folder, else
    ``run`` for one row, ``runs`` for several."""
    if rows and all(row.sweep is not None for row in rows):
        return "sweep results"
    return "run" if len(rows) == 1 else "runs"


def title(rows: list[Row]) -> str:
    """The table's title: :func:`kind`, then ``ranked by <metric> (<mode>)`` (one run:
    ``objective <metric> (<mode>)``), or ranked by each one's objective when they differ."""
    found = objectives(rows)
    words = kind(rows)
    if len(found) == 1:
        (metric, mode), = found
        return f"{words}: {'objective' if words == 'run' else 'ranked by'} {metric} ({mode})"
    return f"{words}: ranked by each {_noun(rows)}'s objective" if found else words


def _noun(rows: list[Row]) -> str:
    return "job" if kind(rows) == "sweep results" else "run"


def shared(rows: list[Row], same: list[tuple[str, str]] = ()) -> str | None:
    """The line above the table: ``all runs:`` (``all jobs:`` in a sweep) the overrides every
    row has, then each column ``same`` for all as ``name value``; None when there is none."""
    parts = [" ".join(common(rows))] if common(rows) else []
    parts += [f"{SAID.get(name, name)} {value}" for name, value in same]
    return f"all {_noun(rows)}s: " + "; ".join(parts) if parts else None


def captions(rows: list[Row], groups: list[SeedGroup] | None = None) -> list[str]:
    """The lines below the table: objectives that differ, and a note on the seed groups."""
    lines = []
    found = objectives(rows).most_common()
    if len(found) > 1:
        (metric, mode), count = found[0]
        parts = [f"{metric} ({mode}) in {count} {_noun(rows)}s"]
        parts += [f"{m} ({d}) in {c}" for (m, d), c in found[1:]]
        lines.append("objectives differ: " + ", ".join(parts))
    if groups:
        seeded = sum(len(group.seeds) > 1 for group in groups)
        lines.append(f"seeds: {seeded} of {len(groups)} configurations ran with several seeds; "
                     "mean ± std of best per configuration in the second table")
    return lines


# -- columns -------------------------------------------------------------------------------

def columns(rows: list[Row]) -> list[Column]:
    """The ranked rows' columns as a person reads them: ``#``, ``job``, one per varying
    override key, the objective's best and its iteration, the final validation and test
    metrics, status and time (numbers to 4 significant digits)."""
    keys = varying(rows)
    names = [name for name in metric_names(rows) if not name.startswith("train/")]
    found = objectives(rows)
    values = [{override_key(o): override_value(o) for o in row.overrides} for row in rows]
    made = [Column("#", [str(i) for i in range(1, len(rows) + 1)], right=True, key=True),
            Column("job", [row.job for row in rows], key=True)]
    made += [Column(short, [value_text(v.get(key, "")) for v in values], override=True)
             for key, short in zip(keys, short_keys(keys))]
    made += [Column(f"best {next(iter(found))[0]}" if len(found) == 1 else "best",
                    [render.short(row.best) for row in rows], right=True, kept=True),
             Column("at iter", [render.short(row.best_iteration) for row in rows], right=True)]
    made += [Column(name, [render.short(row.metrics.get(name)) for row in rows], right=True,
                    movable=True) for name in names]
    made += [Column("status", [_status(row) for row in rows]),
             Column("time", [render.duration(row.elapsed_s) for row in rows], right=True)]
    return made


def _status(row: Row) -> str:
    return f"{row.status}: {row.error}" if row.error and row.status == "failed" else row.status


def seed_columns(rows: list[Row], groups: list[SeedGroup]) -> list[Column]:
    """The seed groups' columns: rank, the overrides that vary (less the seed), n, mean and
    standard deviation of the best value, the seeds."""
    shown = set(varying(rows)) - {"seed"}
    return [Column("#", [str(i) for i in range(1, len(groups) + 1)], right=True, key=True),
            Column("overrides", [" ".join(o for o in g.overrides if override_key(o) in shown)
                                 for g in groups]),
            Column("n", [str(g.n) for g in groups], right=True),
            Column("mean", [render.short(g.mean) for g in groups], right=True),
            Column("std", [render.short(g.std) for g in groups], right=True),
            Column("seeds", [" ".join(g.seeds) for g in groups])]


def _seed_title(groups: list[SeedGroup]) -> str:
    metrics = {g.metric for g in groups if g.metric}
    return f"across seeds: mean ± std of best {metrics.pop() if len(metrics) == 1 else 'objective'}"


# -- rendering -----------------------------------------------------------------------------

def show(rows: list[Row], console: Console | None = None) -> None:
    """Prints the ranked table on ``console`` (default: stdout) within its width: the title,
    the line of what all rows share (:func:`shared`), the table (and its continuation when
    the columns do not fit side by side: :func:`.fit.fit`), the captions, then the seed
    groups' table when there are any. A console that is no terminal (a log file) is as wide
    as ``COLUMNS`` says, else :data:`LOG_WIDTH`."""
    console = console or Console(emoji=False)
    groups = by_seed(rows)
    rows = rank(rows)
    width = console.width
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        width = max(width, LOG_WIDTH)
        console = Console(file=console.file, width=width, emoji=False)
    shown, same = constant(columns(rows))
    _say(console, title(rows))
    line = shared(rows, same)
    if line:
        _say(console, line)
    for i, table in enumerate(fit(shown, width)):
        console.print(render.rich_table(table, "(continued)" if i else None))
    for caption in captions(rows, groups):
        _say(console, caption)
    if groups:
        _say(console, _seed_title(groups))
        for table in fit(seed_columns(rows, groups), width):
            console.print(render.rich_table(table))


def _say(console: Console, line: str) -> None:
    """One line of text, wrapped at spaces to the console's width."""
    console.print(escape(line), highlight=False)


def write(rows: list[Row], folder: Path) -> None:
    """Writes ``results.csv`` and ``results.md`` (and ``results_by_seed.csv`` when seed groups
    exist) into ``folder``, each atomically, in ranked order (the rows are ranked here; the
    seed groups are formed in the given, job, order). ``results.md`` has every column."""
    folder = Path(folder)
    groups = by_seed(rows)
    rows = rank(rows)
    write_atomic(folder / CSV, csv_text(rows))
    made = columns(rows)
    above = [line for line in [shared(rows)] if line]
    text = render.markdown(title(rows), [c.name for c in made], _cells(made), captions(rows, groups),
                           above)
    if groups:
        seed_header = ["rank", "overrides", "n", "mean", "std", "seeds"]
        seed_cells = [[i, " ".join(g.overrides), g.n, g.mean, g.std, " ".join(g.seeds)]
                      for i, g in enumerate(groups, 1)]
        write_atomic(folder / BY_SEED_CSV, render.csv_text(seed_header, seed_cells))
        made = seed_columns(rows, groups)
        text += "\n" + render.markdown(_seed_title(groups), [c.name for c in made], _cells(made), [])
    write_atomic(folder / MARKDOWN, text)


def _cells(made: list[Column]) -> list[list[str]]:
    return [list(row) for row in zip(*(c.cells for c in made))]


def csv_text(rows: list[Row]) -> str:
    """The ranked rows as ``results.csv`` text: rank, job, every override, the objective's
    best, its iteration and final value, each final metric, status, error, time, iteration
    (numbers at full precision, an empty cell for a missing value)."""
    rows = rank(rows)
    names = metric_names(rows)
    header = ["rank", "job", "overrides", "metric", "mode", "best", "best_iteration", "final",
              *names, "status", "error", "elapsed_s", "iteration"]
    cells = [[i, row.job, " ".join(row.overrides), row.metric, row.mode, row.best, row.best_iteration,
              row.final, *(row.metrics.get(name) for name in names), row.status, row.error,
              row.elapsed_s, row.iteration] for i, row in enumerate(rows, 1)]
    return render.csv_text(header, cells)
