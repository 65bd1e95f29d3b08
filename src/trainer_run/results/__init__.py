"""Runs compared: the ranked results of a sweep's jobs or of any run folders.

:mod:`.folders` reads run and sweep folders into rows; :mod:`.runs` ranks them by each run's objective and
groups runs that differ only by seed; :mod:`.table` renders the rows as a rich table, CSV
and Markdown; :mod:`.plot` draws each run's objective curve into one PNG (matplotlib). The
end of a sweep and ``trainer-report`` use them; so can a notebook::

    from trainer_run import results
    rows = results.rank(results.collect([Path("runs/multirun/2026-11-21/10-53-00")]))
"""

from .runs import (
    NOT_A_RUN,
    Row,
    SeedGroup,
    by_seed,
    captions,
    collect,
    common,
    csv_text,
    is_run,
    labels,
    override_key,
    rank,
    read_run,
    show,
    varying,
    write,
)

__all__ = ["NOT_A_RUN", "Row", "SeedGroup", "by_seed", "captions", "collect", "common", "csv_text",
           "is_run", "labels", "override_key", "rank", "read_run", "show", "varying", "write"]
