"""ProfileReport: at the end of a profiled run, where its time went (``profile.json`` and a
table on the console)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainer_run.profiling import OTHER, STARTUP
from trainer_run.storage import run_files

from ...storage import files, strict_json
from ..extension import PRIORITY_READER, Extension


class ProfileReport(Extension):
    """Writes ``profile.json`` and prints a table of the :class:`~..profile.Profiler`'s stages
    when training ends, however it ends: per stage its total seconds, its share of the
    profiled time and milliseconds per iteration, then ``other`` and each extension's seconds.

    ``profile.json``: ``session_s`` (seconds from this job's start, the start of the log's
    clock, to this report, after every other extension has finalized: ``start-up`` (to the
    first iteration), every stage and ``other`` add up to it), ``iterations`` (this
    session's), ``stages`` (stage -> ``total_s``, ``percent``, ``per_iteration_ms`` (null for
    ``start-up``); ``start-up``, then :data:`~..profile.STAGES` in order, then ``other``), ``extensions``
    (name -> seconds; what is left of ``extensions`` is the triggers') and ``notes`` (stage ->
    why it is 0 in this run). Strict JSON, replaced atomically.

    Args:
        profiler: the run's :class:`~..profile.Profiler`.
        notes: stage -> a word on why it takes no time in this run (e.g. no kvstore).

    A reader registered last: it finalizes after every other extension, so their finalizing
    is in the report.
    """

    priority = PRIORITY_READER
    name = "profile"

    def __init__(self, profiler, notes: dict | None = None, console: Console | None = None):
        self.profiler = profiler
        self.notes = dict(notes or {})
        self.console = console or Console(emoji=False)
        self._first_iteration = 0

    def initialize(self, trainer) -> None:
        self._first_iteration = trainer.updater.iteration

    def finalize(self, trainer) -> None:
        report = self.report(trainer.updater.iteration - self._first_iteration)
        files.write_atomic(Path(trainer.out) / run_files.PROFILE, strict_json.dumps(report, indent=2),
                           run=trainer.out)
        self.console.print(self.table(report))

    def report(self, iterations: int) -> dict:
        """The profile as plain data (the layout of ``profile.json``)."""
        session = self.profiler.elapsed()
        stages = {name: {"total_s": seconds,
                         "percent": 100.0 * seconds / session if session > 0 else 0.0,
                         "per_iteration_ms": None if name == STARTUP else
                         1000.0 * seconds / iterations if iterations else 0.0}
                  for name, seconds in self.profiler.by_stage().items()}
        return {"session_s": session, "iterations": iterations, "stages": stages,
                "extensions": self.profiler.extensions(), "notes": self.notes}

    def table(self, report: dict) -> Table:
        """The report as a rich table, extensions by name below their stage."""
        table = Table(title=f"profile: {report['session_s']:.3f} s over "
                            f"{report['iterations']} iterations")
        for column, justify in (("stage", "left"), ("total s", "right"), ("% of run", "right"),
                                ("per iteration ms", "right"), ("", "left")):
            table.add_column(column, justify=justify)
        session = report["session_s"]
        for name, row in report["stages"].items():
            per_iteration = row["per_iteration_ms"]
            table.add_row(name, f"{row['total_s']:.3f}", f"{row['percent']:.1f}",
                          "" if per_iteration is None else f"{per_iteration:.3f}",
                          report["notes"].get(name, ""),
                          end_section=name in ("extensions", OTHER))
            if name == "extensions":
                for extension, seconds in sorted(report["extensions"].items(),
                                                 key=lambda item: -item[1]):
                    share = 100.0 * seconds / session if session > 0 else 0.0
                    table.add_row(f"  {extension}", f"{seconds:.3f}", f"{share:.1f}", "", "",
                                  style="dim")
        return table
