"""One ranked results table from finished run folders (the end of a sweep, ``trainer-report``).

:func:`collect` reads run and sweep folders into :class:`Row` s (:mod:`.folders`),
:func:`rank` orders the runs that finished (completed or diverged) by each run's objective
and lists the others (failed, interrupted, unfinished) below them, :func:`varying` names the
override keys that differ between them, :func:`by_seed` groups runs that differ only in
``seed=``, and :func:`write` / :func:`show` render the table (``results.csv``, ``results.md``,
``results_by_seed.csv``; a rich table). Nothing here depends on Hydra's runtime.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..files import write_atomic
from . import table as render
from .folders import NOT_A_RUN, Row, collect, is_run, read_run

__all__ = ["NOT_A_RUN", "Row", "SeedGroup", "by_seed", "captions", "collect", "common", "csv_text",
           "is_run", "labels", "override_key", "rank", "read_run", "show", "varying", "write"]
PREFIXES = ("train/", "val/", "test/")


@dataclass
class SeedGroup:
    """The runs that differ only in their ``seed=`` override: the mean and sample standard
    deviation of their ``best`` over the ``n`` runs that finished with one (completed or
    diverged; a failed or interrupted run is left out), ``std`` None when n < 2."""

    overrides: list[str]
    n: int
    mean: float | None
    std: float | None
    seeds: list[str]
    metric: str | None
    mode: str | None


# -- ordering and grouping -----------------------------------------------------------------

def rank(rows: list[Row]) -> list[Row]:
    """The runs that finished (completed or diverged, :attr:`Row.ranked`) with a ``best``
    first, better first by their own mode (``min`` ascending, ``max`` descending; ties in the
    given order), then those without one, then the runs that did not finish (failed,
    interrupted, unfinished), each in the given order."""
    finished = [row for row in rows if row.ranked]
    return _ranked(finished, lambda row: row.best) + [row for row in rows if not row.ranked]


def _ranked(items: list, value) -> list:
    """``items`` better ``value(item)`` first by each item's own ``mode`` (ties in the given
    order), then those whose value is None in the given order."""
    def key(pair):
        index, item = pair
        if value(item) is None:
            return (1, 0.0, index)
        return (0, -value(item) if item.mode == "max" else value(item), index)

    return [item for _, item in sorted(enumerate(items), key=key)]


def override_key(override: str) -> str:
    """The key of ``key=value``: what precedes the first ``=``, less a leading ``+`` or ``~``."""
    return override.split("=", 1)[0].lstrip("+~")


def override_value(override: str) -> str:
    """The value of ``key=value`` (``~key`` alone, a deletion, is shown as ``~``)."""
    return override.split("=", 1)[1] if "=" in override else "~"


def _by_key(overrides: list[str]) -> dict[str, str]:
    return {override_key(o): override_value(o) for o in overrides}


def varying(rows: list[Row]) -> list[str]:
    """The override keys whose values differ between rows (a key some rows lack varies), in
    order of first appearance."""
    parsed = [_by_key(row.overrides) for row in rows]
    keys = list(dict.fromkeys(key for row in parsed for key in row))
    return [key for key in keys if len({row.get(key) for row in parsed}) > 1]


def common(rows: list[Row]) -> list[str]:
    """The overrides every row has with the same value, as the first row writes them."""
    if not rows:
        return []
    differ = set(varying(rows))
    return [o for o in rows[0].overrides if override_key(o) not in differ]


def by_seed(rows: list[Row]) -> list[SeedGroup]:
    """The rows grouped by their overrides less ``seed=``, ranked by mean best (the groups'
    mode; groups without a value last); [] unless some row has a seed and some group 2+."""
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        rest = tuple(sorted(o for o in row.overrides if override_key(o) != "seed"))
        groups.setdefault(rest, []).append(row)
    if not any(len(_seeds(members)) >= 2 for members in groups.values()):
        return []
    return _ranked([_group(members) for members in groups.values()], lambda group: group.mean)


def _seeds(rows: list[Row]) -> list[str]:
    """The rows' seeds, in numeric order."""
    seeds = [override_value(o) for row in rows for o in row.overrides if override_key(o) == "seed"]
    return sorted(seeds, key=lambda seed: (not seed.isdigit(), int(seed) if seed.isdigit() else 0, seed))


def _group(rows: list[Row]) -> SeedGroup:
    values = [row.best for row in rows if row.best is not None and row.ranked]
    scored = [row for row in rows if row.best is not None and row.ranked] or rows
    return SeedGroup(
        overrides=[o for o in rows[0].overrides if override_key(o) != "seed"], n=len(values),
        mean=statistics.mean(values) if values else None,
        std=statistics.stdev(values) if len(values) > 1 else None,
        seeds=_seeds(rows), metric=scored[0].metric, mode=scored[0].mode)


# -- captions ------------------------------------------------------------------------------

def objectives(rows: list[Row]) -> Counter:
    """How many rows rank by each (metric, mode), most common first."""
    return Counter((row.metric, row.mode or "min") for row in rows if row.metric)


def title(rows: list[Row]) -> str:
    """``sweep results: ranked by <metric> (<mode>)``, or by each job's objective when they differ."""
    found = objectives(rows)
    if len(found) == 1:
        (metric, mode), = found
        return f"sweep results: ranked by {metric} ({mode})"
    return "sweep results: ranked by each job's objective"


def captions(rows: list[Row], groups: list[SeedGroup] | None = None) -> list[str]:
    """The lines below the table: objectives that differ, the overrides common to all jobs,
    and a note on the seed groups."""
    lines = []
    found = objectives(rows).most_common()
    if len(found) > 1:
        (metric, mode), count = found[0]
        parts = [f"{metric} ({mode}) in {count} jobs"] + [f"{m} ({d}) in {c}" for (m, d), c in found[1:]]
        lines.append("objectives differ: " + ", ".join(parts))
    shared = common(rows)
    if shared:
        lines.append("all jobs: " + " ".join(shared))
    if groups:
        seeded = sum(len(group.seeds) > 1 for group in groups)
        lines.append(f"seeds: {seeded} of {len(groups)} configurations ran with several seeds; "
                     "mean ± std of best per configuration in the second table")
    return lines


def metric_names(rows: list[Row]) -> list[str]:
    """Every final metric any row has: train/ first, then val/, then test/, each by name."""
    names = {name for row in rows for name in row.metrics}
    order = {prefix: i for i, prefix in enumerate(PREFIXES)}
    return sorted(names, key=lambda n: (order.get(n.split("/", 1)[0] + "/", len(PREFIXES)), n))


# -- rendering -----------------------------------------------------------------------------

def write(rows: list[Row], folder: Path) -> None:
    """Writes ``results.csv`` and ``results.md`` (and ``results_by_seed.csv`` when seed groups
    exist) into ``folder``, each atomically, in ranked order (the rows are ranked here; the
    seed groups are formed in the given, job, order)."""
    folder = Path(folder)
    groups = by_seed(rows)
    rows = rank(rows)
    write_atomic(folder / "results.csv", csv_text(rows))
    text = render.markdown(title(rows), *_display(rows), captions(rows, groups))
    if groups:
        seed_header = ["rank", "overrides", "n", "mean", "std", "seeds"]
        seed_cells = [[i, " ".join(g.overrides), g.n, g.mean, g.std, " ".join(g.seeds)]
                      for i, g in enumerate(groups, 1)]
        write_atomic(folder / "results_by_seed.csv", render.csv_text(seed_header, seed_cells))
        text += "\n" + render.markdown(_seed_title(groups), *_seed_display(rows, groups), [])
    write_atomic(folder / "results.md", text)


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


def labels(rows: list[Row]) -> list[str]:
    """A short name for each row: its varying overrides as ``key=value`` (keys shortened as
    in the table), else its job; prefixed by the job where two rows would share a name."""
    keys = varying(rows)
    short = dict(zip(keys, _short_keys(keys)))
    names = []
    for row in rows:
        values = _by_key(row.overrides)
        given = [f"{short[key]}={_value_text(values[key])}" for key in keys if key in values]
        names.append(" ".join(given) or row.job)
    return [f"{row.job}: {name}" if names.count(name) > 1 and name != row.job else name
            for row, name in zip(rows, names)]


def show(rows: list[Row], console: Console | None = None) -> None:
    """Prints the ranked table (then the seed groups' table, when any) on ``console``
    (default: stdout), with the captions below."""
    console = console or Console()
    groups = by_seed(rows)
    rows = rank(rows)
    header, cells = _display(rows)
    right = {"#", "at iter", "time", *(h for h in header if h.startswith("best"))} | set(metric_names(rows))
    if not console.is_terminal:  # a log file: as wide as the table needs
        console = Console(file=console.file, width=max(console.width, 200))
    console.print(render.rich_table(title(rows), header, cells, right))
    for line in captions(rows, groups):
        console.print(escape(line), highlight=False, soft_wrap=True)
    if groups:
        seed_header, seed_cells = _seed_display(rows, groups)
        console.print(render.rich_table(_seed_title(groups), seed_header, seed_cells,
                                        {"#", "n", "mean", "std"}))


def _display(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The header and formatted cells a person reads (rich and Markdown): the varying
    overrides one column per key, numbers to 4 significant digits, the time."""
    keys = varying(rows)
    names = [name for name in metric_names(rows) if not name.startswith("train/")]
    found = objectives(rows)
    best = f"best {next(iter(found))[0]}" if len(found) == 1 else "best"
    header = ["#", "job", *_short_keys(keys), best, "at iter", *names, "status", "time"]
    cells = []
    for i, row in enumerate(rows, 1):
        values = _by_key(row.overrides)
        status = f"{row.status}: {row.error}" if row.error and row.status == "failed" else row.status
        given = (_value_text(values.get(key, "")) for key in keys)
        final = (render.short(row.metrics.get(n)) for n in names)
        cells.append([str(i), row.job, *given, render.short(row.best),
                      render.short(row.best_iteration), *final, status, render.duration(row.elapsed_s)])
    return header, cells


def _value_text(text: str) -> str:
    """An override's value for a person: a long decimal number to 4 significant digits."""
    try:
        return render.short(float(text)) if len(text) > 6 and "." in text else text
    except ValueError:
        return text


def _short_keys(keys: list[str]) -> list[str]:
    """Each override key by its last dotted part (``learning_rate``) where that is unique."""
    last = [key.rsplit(".", 1)[-1] for key in keys]
    return [short if last.count(short) == 1 else key for key, short in zip(keys, last)]


def _seed_title(groups: list[SeedGroup]) -> str:
    metrics = {g.metric for g in groups if g.metric}
    return f"across seeds: mean ± std of best {metrics.pop() if len(metrics) == 1 else 'objective'}"


def _seed_display(rows: list[Row], groups: list[SeedGroup]) -> tuple[list[str], list[list[str]]]:
    shown = set(varying(rows)) - {"seed"}
    header = ["#", "overrides", "n", "mean", "std", "seeds"]
    cells = [[str(i), " ".join(o for o in g.overrides if override_key(o) in shown), str(g.n),
              render.short(g.mean), render.short(g.std), " ".join(g.seeds)] for i, g in enumerate(groups, 1)]
    return header, cells
