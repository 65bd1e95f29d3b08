"""What a run tells the user on the console: its lines (stdout), its warnings, notes and hints
(stderr), the model's table, and an error as one line.

Every line shows the user's text as it was given: the labels' colours are our only markup
(the user's text is escaped, so ``[bold]`` stays ``[bold]``) and no emoji code is replaced
(``max_time='00:-1:00:00'`` stays ``:-1:``, not a thumbs-down): print through :func:`console`."""

from __future__ import annotations

import re
import signal
import subprocess
import traceback
from pathlib import Path

from omegaconf.errors import OmegaConfBaseException
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainer_run import stop_signals
from trainer_run.errors import StorageError

LABELS = {"hint": "cyan", "note": "blue", "warning": "yellow"}
"""Lines of what a run is about to do that go to stderr, by label, with their colour."""


def console(stderr: bool = False, **options) -> Console:
    """A console (stdout, or stderr with ``stderr``) that replaces no emoji code (``:-1:``,
    ``:smile:``) in what it prints; text that holds the user's words goes through
    :func:`~rich.markup.escape` or is printed with ``markup=False``."""
    return Console(stderr=stderr, emoji=False, **options)


def show_cause(error: BaseException) -> None:
    """Prints the traceback of what ``error`` was raised from (its ``__cause__``: the user's
    code that raised, :mod:`trainer_run.user_code`), if it has one, on stderr, from the first
    frame outside trainer-run's package (the calls that led there are ours)."""
    cause = error.__cause__
    if cause is None:
        return
    tb, ours = cause.__traceback__, Path(__file__).parent
    while tb is not None and tb.tb_next is not None and \
            Path(tb.tb_frame.f_code.co_filename).is_relative_to(ours):
        tb = tb.tb_next  # from the first frame of the user's code on
    traceback.print_exception(type(cause), cause, tb)


def warn(message: str) -> None:
    console(stderr=True).print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False,
                              soft_wrap=True)


def say(line: str) -> None:
    """Prints one line of what the run does on stdout (the run's own output: its directory,
    model, progress and metrics; errors, warnings and hints go to stderr)."""
    console().print(escape(line), highlight=False, soft_wrap=True)


def inform(lines: str) -> None:
    """Prints what the run is about to do: each line as it is on stdout, a ``hint:``,
    ``note:`` or ``warning:`` line highlighted on stderr."""
    for line in lines.splitlines():
        label, _, rest = line.partition(": ")
        if label in LABELS and rest:
            console(stderr=True).print(f"[bold {LABELS[label]}]{label}:[/] {escape(rest)}",
                                       highlight=False, soft_wrap=True)
        else:
            say(line)


def show_model(summary: dict) -> None:
    """Prints the model's layers with their parameter counts, and the total (parameters and
    bytes), as a table on stdout; where a parameter is frozen or has a multiplier, a column
    ``training`` gives the summary's note for its layer (:func:`trainer_run.module.summary`),
    and the total's row the values trained."""
    notes = summary.get("training")
    table = Table(title=f"model: {escape(summary['class'])}", title_justify="left", box=None)
    table.add_column("layer")
    table.add_column("parameters", justify="right")
    if notes:
        table.add_column("training")
    for layer, count in summary["layers"].items():
        table.add_row(escape(layer), f"{count:,}", *([escape(notes.get(layer, ""))] if notes else []))
    table.add_section()
    trained = [f"{summary['trained']:,} trained" if "trained" in summary else ""] if notes else []
    table.add_row("total", f"{summary['parameters']:,} ({_size(summary['bytes'])})", *trained)
    console().print(table)


def _size(nbytes: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if nbytes < 1024 or unit == "MiB":
            return f"{nbytes:,} {unit}" if unit == "bytes" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1024
    return ""


PLUGINS = {"sweeper/optuna": ("hydra-optuna-sweeper", "sweep"),
           "launcher/joblib": ("hydra-joblib-launcher", "sweep"),
           "launcher/submitit_slurm": ("hydra-submitit-launcher", "slurm"),
           "launcher/submitit_local": ("hydra-submitit-launcher", "slurm")}
"""Hydra's plugins our configs name: their package and the extra of ours that installs it."""


def describe(error: Exception) -> str:
    """One line for an error Hydra or OmegaConf raised while composing the config (for a
    sweeper or launcher of :data:`PLUGINS` that is not installed, the pip command)."""
    missing = re.search(r"Could not find 'hydra/(\w+/\w+)'", str(error))
    if missing and missing.group(1) in PLUGINS:
        package, extra = PLUGINS[missing.group(1)]
        group, name = missing.group(1).split("/")
        return f'hydra/{group}={name} needs {package}: pip install "trainer-run[{extra}]"'
    if isinstance(error, OmegaConfBaseException):
        where = getattr(error, "full_key", None)
        message = str(error).splitlines()[0]
        return f"the config does not resolve: {message}" + (f" (at {where})" if where else "")
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines) or type(error).__name__


def last_said(done: subprocess.CompletedProcess) -> str:
    """What a command that failed said last: its last line on stderr, else its exit status."""
    return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]


def cannot_write(error: OSError | StorageError) -> str:
    """One line for a write the disk refused, and what to do about it."""
    if isinstance(error, StorageError):
        return f"{error}; free some space or choose a writable hydra.run.dir"
    return (f"cannot write {error.filename or 'the run directory'}: {error.strerror or error}; free "
            "some space or choose a writable hydra.run.dir")


def failed_file(error: OSError | StorageError, out: Path) -> tuple[str, int]:
    """One line and the exit status for a file that failed a run before training: the disk
    refusing a write (a StorageError, or an error on the run directory ``out`` or in it) is 4,
    anything else a file the run reads, the user's to fix, 2."""
    filename = getattr(error, "filename", None)
    path = Path(str(filename)).absolute() if filename is not None else None
    if isinstance(error, StorageError) or path is not None and (
            path == out.absolute() or out.absolute() in path.parents):
        return cannot_write(error), 4
    return f"cannot read {filename or 'a file the run needs'}: {error.strerror or error}", 2


def late_signal(status: str) -> None:
    """Says so when a stop signal came after the last iteration of a run that ended with
    ``status``, while it wrote its last files: it completed them (a second signal would have
    aborted it), so the run is complete and the command ends as it does for a complete run."""
    signum = stop_signals.requested()
    if status == "completed" and signum is not None:
        warn(f"{signal.Signals(signum).name} came while the run was writing its last files; "
             "they are complete and so is the run, nothing was cut short")
