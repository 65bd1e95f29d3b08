"""The ``trainer-report`` command: finished (or running) runs compared in one ranked table.

It reads run folders and sweep folders (:func:`results.collect`), prints the same ranked
table as the end of a sweep (:func:`results.show`, fitted to the terminal's width) on stdout,
and writes a PNG of each run's objective curve (:mod:`trainer_run.results.comparison_plot`; runs that
differ only by seed as one line, their mean, with a band) and, with ``--csv``, the table as
CSV. The PNG goes where ``--plot`` says, by default into the current folder; nothing is ever
written inside a run folder it reads (an output named there is refused in one line; the
default place there is left out with a warning, the table still printed). Everything
is read and checked before anything is written: a folder that is neither a run nor a sweep,
or a run file that cannot be parsed, prints one ``error:`` line naming it and exits with
status 2. Without matplotlib the table is still printed, with one line on how to get the
plot. Ctrl-C exits with status 130 and one line: the module imports only the standard
library at its top, the rest inside the functions that :func:`main` guards.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import commands

PROG = "trainer-report"
PLOT_NAME = "comparison.png"
EXTRA = 'pip install "trainer-run[plot]"'

DESCRIPTION = """\
Compare training runs: read run folders (each holds summary.json, metrics.jsonl, .hydra/)
and sweep folders (their runs are the numbered subfolders), and print one table ranked by
each run's objective (objective.metric, best first): the overrides that differ between
runs, the best value and its iteration, the final validation and test metrics, how each
run ended and its time; a second table groups runs that differ only in seed= (mean and
standard deviation). A run still going, or killed, is a row marked unfinished. The table
fits the terminal (or COLUMNS): what all runs share is said once above it, and columns that
do not fit side by side continue in a second table; nothing is cut.

It also draws the objective of every run against the iteration into one PNG (--plot),
each run's best point marked, runs that differ only in seed= as their mean with a band from
the lowest to the highest; that needs matplotlib: pip install "trainer-run[plot]".
Nothing but the files named here is written, and never inside a run folder it reads (a
colleague's copied run stays as it came): the plot goes into the current folder by default."""

EPILOG = """\
examples:
  trainer-report runs/multirun/2026-11-21/10-53-00        table; comparison.png here
  trainer-report runs/2026-11-21/10-53-00 runs/2026-11-21/11-20-41 --plot lr.png
  trainer-report runs/lr-search runs/wd-search --csv both.csv

exit status: 0 when the table was printed, 2 for a folder or file that cannot be read
(one error: line naming it), 4 when the disk refuses a write, 130 on Ctrl-C."""


def parser() -> argparse.ArgumentParser:
    """The command's arguments and its --help."""
    made = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("folders", nargs="+", type=Path, metavar="DIR",
                      help="a run folder or a sweep folder of runs; several are compared together")
    made.add_argument("--plot", type=Path, metavar="FILE",
                      help=f"where the PNG of the objective curves goes (default: {PLOT_NAME} in "
                           "the current folder); never inside a run folder it reads")
    made.add_argument("--csv", type=Path, metavar="FILE",
                      help="also write the ranked table as CSV (the columns of a sweep's results.csv)")
    return made


def main(argv: list[str] | None = None) -> None:
    """Runs the command (the console script's entry point)."""
    commands.main(parser(), run, argv)


def run(options: argparse.Namespace) -> int:
    """Reads the folders, prints the table, writes the plot (and CSV); the exit status."""
    from trainer_run import results
    from trainer_run.console import console as make_console
    from trainer_run.console import warn
    from trainer_run.errors import ConfigError, StorageError
    from trainer_run.results import curves as lines

    from .failure import fail

    target = options.plot or Path(PLOT_NAME)
    try:
        rows = results.rank(results.collect(options.folders, warn))
        for flag, path in (("--plot", options.plot), ("--csv", options.csv)):
            _check_writable(path)
            _check_outside(flag, path, rows)
        name, mode = lines.metric(rows)
        curves = lines.by_seed(rows, lines.curves(rows, name, mode, warn), mode) if name else []
    except ConfigError as e:
        fail(e)
    console = make_console()
    results.show(rows, console)
    try:
        if options.csv:
            from trainer_run.storage.files import write_atomic

            write_atomic(options.csv, results.csv_text(rows))
            console.print(f"csv: {options.csv}", highlight=False, soft_wrap=True, markup=False)
        held = None if options.plot else _run_holding(target, rows)
        if held is not None:
            warn(f"no plot: the current folder is in the run {held}, which {PROG} reads and "
                 "never writes into; choose where it goes with --plot FILE")
        else:
            _plot(curves, name, mode, target, console, asked=options.plot is not None)
    except StorageError as e:
        fail(e, e.exit_code)
    return 0


def _check_writable(path: Path | None) -> None:
    """Refuses (ConfigError) an output file whose folder does not exist, or that is a folder."""
    from trainer_run.errors import ConfigError

    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; give a file name for the output")
    if not path.absolute().parent.is_dir():
        raise ConfigError(f"cannot write {path}: the folder {path.absolute().parent} does not exist")


def _check_outside(flag: str, path: Path | None, rows) -> None:
    """Refuses (ConfigError) an output file inside a run folder being read: a run, yours or
    a colleague's copy, is only ever read."""
    from trainer_run.errors import ConfigError

    run = _run_holding(path, rows) if path is not None else None
    if run is not None:
        raise ConfigError(f"{flag} {path} is inside the run {run}, which {PROG} reads and never "
                          "writes into; give a file elsewhere (by default the current folder)")


def _run_holding(path: Path, rows) -> Path | None:
    """The run folder among ``rows``' that ``path`` lies in (links followed), else None."""
    where = path.absolute().resolve()
    for row in rows:
        run = Path(row.path).absolute().resolve()
        if run == where or run in where.parents:
            return Path(row.path)
    return None


def _plot(curves, name, mode, target: Path, console, asked: bool) -> None:
    """Draws the curves into ``target``. When the file was not ``asked`` for (the default
    place, the current folder) and the disk refuses it, the table stands: a warning says so."""
    from trainer_run.console import warn
    from trainer_run.errors import StorageError
    from trainer_run.results import comparison_plot

    if not any(curve.values for curve in curves):
        warn(f"no plot: no run logged {name or 'an objective'} in its metrics.jsonl yet")
        return
    try:
        comparison_plot.draw(curves, name, mode, target)
    except ImportError:
        warn(f"no plot: the comparison plot needs matplotlib ({EXTRA})")
        return
    except StorageError as e:
        if asked:
            raise
        warn(f"no plot: {e}; choose where it goes with --plot FILE")
        return
    console.print(f"plot: {target}", highlight=False, soft_wrap=True, markup=False)


if __name__ == "__main__":
    main()
