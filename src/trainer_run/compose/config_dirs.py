"""A resumed run's options from a config folder of the user's (``--config-dir DIR``).

A run started with ``--config-dir ./conf model=mynet`` chose ``model=mynet`` from that folder,
and a resume composes the run's choices again: without the folder, Hydra would stop with its
own message (``Could not find 'model/mynet'``). :func:`check_found` says instead which
``--config-dir`` to pass, the folder the run was started with as Hydra recorded it
(``.hydra/hydra.yaml``: ``hydra.runtime.config_sources``, the ``command-line`` ones).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from trainer_run.compose import argv as args
from trainer_run.compose.options import OPTIONS
from trainer_run.errors import ConfigError
from trainer_run.storage import run_files, yaml_files


def check_found(choices: dict, argv: list[str], run: Path | None) -> None:
    """Refuses a resume of ``run`` whose group ``choices`` name an option that is neither ours
    nor in a ``--config-dir`` of ``argv``, naming the folder to pass: the one Hydra recorded
    for ``run``, which must be None unless this user signed the run (Hydra's record is not
    signed, and a pasted ``--config-dir`` composes the folder and runs its callbacks); for
    None the line names the option's file instead."""
    folders = args.config_dirs(argv)
    for group, choice in choices.items():
        if choice in OPTIONS.get(group, ()) or any((f / group / f"{choice}.yaml").is_file()
                                                   for f in folders):
            continue
        recorded = recorded_dirs(run) if run is not None else []
        source = f"its config folder {recorded[0]}" if recorded else "a config folder of yours"
        folder = shlex.quote(recorded[0]) if recorded else "DIR"
        which = "" if recorded else f", DIR being your folder that holds {group}/{choice}.yaml"
        resume = shlex.quote(str(args.value(argv, "resume")))
        raise ConfigError(f"the run chose {group}={choice} from {source}, which this command does "
                          f"not give; resume it with: trainer-run --config-dir {folder} "
                          f"resume={resume}{which}")


def recorded_dirs(run: Path) -> list[str]:
    """The ``--config-dir`` folders Hydra recorded for ``run`` (none when it recorded none, or
    its record cannot be read)."""
    try:
        hydra = yaml_files.read(run / run_files.RECORD / run_files.HYDRA)
        return given(hydra["hydra"]["runtime"]["config_sources"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
        return []


def given(sources: list) -> list[str]:
    """The ``--config-dir`` folders among Hydra's ``hydra.runtime.config_sources``."""
    return [str(s["path"]) for s in sources
            if s.get("provider") == "command-line" and s.get("schema") == "file"]
