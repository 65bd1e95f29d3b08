"""Runs compared: ranked, their differences named, grouped by seed (the end of a sweep,
``trainer-report``).

:func:`collect` reads run and sweep folders into :class:`Row` s (:mod:`.folders`),
:func:`rank` orders the runs that finished (completed or diverged) by each run's objective
and lists the others (failed, interrupted, unfinished) below them, :func:`varying` names the
override keys that differ between them and :func:`labels` each run by them, and
:func:`seed_groups` / :func:`by_seed` group the runs that differ only in ``seed=``; the
tables are rendered by :mod:`.report`. Nothing here depends on Hydra's runtime.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from . import table as render
from .folders import NOT_A_RUN, Row, collect, is_run, read_run

__all__ = ["NOT_A_RUN", "Row", "SeedGroup", "by_seed", "collect", "common", "is_run", "labels",
           "metric_names", "objectives", "override_key", "rank", "read_run", "seed_groups",
           "short_keys", "value_text", "varying"]
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


def seed_groups(rows: list[Row]) -> list[list[Row]]:
    """The rows grouped by their overrides less ``seed=`` (in any order), the groups in order
    of their first row and each in the given order; [] unless some group holds two or more
    seeds."""
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        rest = tuple(sorted(o for o in row.overrides if override_key(o) != "seed"))
        groups.setdefault(rest, []).append(row)
    if not any(len(_seeds(members)) >= 2 for members in groups.values()):
        return []
    return list(groups.values())


def by_seed(rows: list[Row]) -> list[SeedGroup]:
    """The :func:`seed_groups` summed up, ranked by mean best (the groups' mode; groups
    without a value last)."""
    return _ranked([_group(members) for members in seed_groups(rows)], lambda group: group.mean)


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




def labels(rows: list[Row], without: tuple[str, ...] = ()) -> list[str]:
    """A short name for each row: its varying overrides (less the keys ``without``) as
    ``key=value`` (keys shortened as in the table: :func:`short_keys`), else its job;
    prefixed by the job where two rows would share a name."""
    keys = [key for key in varying(rows) if key not in without]
    short = dict(zip(keys, short_keys(keys)))
    names = []
    for row in rows:
        values = _by_key(row.overrides)
        given = [f"{short[key]}={value_text(values[key])}" for key in keys if key in values]
        names.append(" ".join(given) or row.job)
    return [f"{row.job}: {name}" if names.count(name) > 1 and name != row.job else name
            for row, name in zip(rows, names)]


def value_text(text: str) -> str:
    """An override's value for a person: a long decimal number to 4 significant digits."""
    try:
        return render.short(float(text)) if len(text) > 6 and "." in text else text
    except ValueError:
        return text


def short_keys(keys: list[str]) -> list[str]:
    """Each override key by its last dotted part (``learning_rate``) where that is unique."""
    last = [key.rsplit(".", 1)[-1] for key in keys]
    return [short if last.count(short) == 1 else key for key, short in zip(keys, last)]


def objectives(rows: list[Row]) -> Counter:
    """How many rows rank by each (metric, mode), most common first."""
    return Counter((row.metric, row.mode or "min") for row in rows if row.metric)


def metric_names(rows: list[Row]) -> list[str]:
    """Every final metric any row has: train/ first, then val/, then test/, each by name."""
    names = {name for row in rows for name in row.metrics}
    order = {prefix: i for i, prefix in enumerate(PREFIXES)}
    return sorted(names, key=lambda n: (order.get(n.split("/", 1)[0] + "/", len(PREFIXES)), n))
