"""The end of a sweep: its jobs ranked by their objective, and how to continue it.

:func:`report` shows the ranked table of the sweep folder's jobs and writes it beside them
(``results.csv``, ``results.md``; :mod:`.results`), then returns the command's exit status:
1 when a job failed (in this process, :data:`.sweep_job.FAILED`, or as its folder records it)
or did not finish, else 0. A sweep cut short (Ctrl-C) also gets the command that continues
it in the same folder (:mod:`.sweep_job` says what continuing does).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from trainer_run import config_upgrade, results
from trainer_run.compose import argv as args
from trainer_run.console import console as make_console
from trainer_run.console import warn
from trainer_run.errors import ConfigError
from trainer_run.storage import yaml_files

from . import sweep_job, sweep_record


def check_same_overrides(folder: Path, argv: list[str]) -> None:
    """Refuses (ConfigError) to continue the sweep in ``folder`` with other overrides than
    those its ``multirun.yaml`` records: Hydra would rewrite that record, and the jobs of
    another sweep would fill the folder beside the old ones."""
    record = Path(folder) / sweep_record.RECORD
    if not record.exists():
        return
    try:
        recorded = [str(o) for o in yaml_files.read_run(record, folder)["hydra"]["overrides"]["task"]]
    except Exception:  # a record that cannot be read is not a sweep to compare with
        raise ConfigError(f"{record} cannot be read as a Hydra multirun record; give "
                          "hydra.sweep.dir a new folder") from None
    recorded = config_upgrade.renamed(recorded)[0]  # a sweep started before keys moved
    given = [a for a in argv if args.is_override(a)
             and not args.key(a).lstrip("+~").startswith(("hydra.", "hydra/"))]
    if sorted(recorded) != sorted(given):
        raise ConfigError(f"{folder} holds a sweep of other overrides ({' '.join(recorded)}); "
                          "continue it with the same ones, or give hydra.sweep.dir a new folder")


def report(folder: Path, argv: list[str], stopped: bool = False) -> int:
    """Shows and writes the ranked results of the sweep in ``folder`` (run by ``argv``, the
    command's arguments); returns the exit status: 1 when a job failed or did not finish
    (completed or diverged), else 0."""
    console = make_console()  # the sweep's answer is its output, as a run's table is
    try:
        rows = results.rank(results.collect([folder], warn))
    except ConfigError:
        return 1  # no job got as far as its folder; each one said why
    results.show(rows, console)
    results.write(rows, folder)
    console.print(f"results: {folder / results.CSV} (and {results.MARKDOWN})", highlight=False,
                  soft_wrap=True, markup=False)
    if stopped:
        command = shlex.join(["trainer-run", *args.without(argv, "hydra.sweep.dir")])
        warn(f"the sweep stopped before its end; continue it with: {command} "
             f"{args.pasteable('hydra.sweep.dir', folder)}")
    return 1 if sweep_job.FAILED or not all(row.ranked for row in rows) else 0
