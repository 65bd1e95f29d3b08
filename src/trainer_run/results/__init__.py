"""Runs compared: the ranked results of a sweep's jobs or of any run folders.

:mod:`.folders` reads run and sweep folders into rows; :mod:`.runs` ranks them by each run's
objective and groups runs that differ only by seed; :mod:`.report` renders the rows as the
console's table (fitted to its width by :mod:`.fit`), CSV and Markdown (cells by
:mod:`.table`); :mod:`.curves` reads each run's objective curve (one per seed group: mean
and band) and :mod:`.comparison_plot` draws them into one PNG (matplotlib). The end of a sweep and
``trainer-report`` use them; so can a notebook::

    from trainer_run import results
    rows = results.rank(results.collect([Path("runs/multirun/2026-11-21/10-53-00")]))
"""

from .report import BY_SEED_CSV, CSV, MARKDOWN, captions, csv_text, show, title, write
from .runs import (
    NOT_A_RUN,
    Row,
    SeedGroup,
    by_seed,
    collect,
    common,
    is_run,
    labels,
    override_key,
    rank,
    read_run,
    seed_groups,
    varying,
)

__all__ = ["BY_SEED_CSV", "CSV", "MARKDOWN", "NOT_A_RUN", "Row", "SeedGroup", "by_seed", "captions",
           "collect", "common", "csv_text",
           "is_run", "labels", "override_key", "rank", "read_run", "seed_groups", "show", "title",
           "varying", "write"]
