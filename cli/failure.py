"""How the command ends on an error: one ``error:`` line, once for the ranks of an ``mpiexec``
job that fail alike, and the exit status. What a run says otherwise is :mod:`trainer_run.console`'s."""

from __future__ import annotations

import sys

from rich.markup import escape

from trainer_run import stop_signals
from trainer_run.console import console

from . import rank_errors


def fail(error, code: int = 2) -> None:
    """Prints ``error`` as one ``error:`` line, once for the ranks of an ``mpiexec`` job that
    fail alike (:mod:`.rank_errors`), and exits with ``code``."""
    for line in rank_errors.lines_to_print(_one_line(error)):
        fail_line(line)
    sys.exit(code)


def fail_line(error) -> None:
    """Prints ``error`` as one ``error:`` line."""
    console(stderr=True).print(f"[bold red]error:[/] {escape(_one_line(error))}", highlight=False,
                              soft_wrap=True)


def _one_line(error) -> str:
    return " ".join(line.strip() for line in str(error).splitlines())


def stop_if_signalled() -> None:
    """Exits with 128 + the signal's number when a stop signal came before training started."""
    signum = stop_signals.requested()
    if signum is not None:
        fail(stop_signals.before_training(signum), 128 + signum)
