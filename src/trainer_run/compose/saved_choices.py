"""A run's group choices as its checkpoint saved them (``optimizer: adam``), read as data: each
must be a group name and an option name, since a resume puts them on its command line."""

from __future__ import annotations

import re
from pathlib import Path

from trainer_run.compose import argv as args
from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint

CHOICE = re.compile(r"[A-Za-z0-9_.\-]+")
GROUP = re.compile(r"[A-Za-z_]\w*(/\w+)*")
NEEDED = {"choices": dict}
"""What :func:`read` needs of a checkpoint."""


def checked(choices: dict, found: Path) -> dict:
    """The checkpoint's group choices, each a group name and an option name: they become
    arguments of the command, so anything else (an override in disguise) is refused."""
    for group, choice in choices.items():
        if not (isinstance(group, str) and GROUP.fullmatch(group) and not group.startswith("hydra")
                and (choice is None or isinstance(choice, str) and CHOICE.fullmatch(choice))):
            raise ConfigError(f"checkpoint {found} is damaged: its choices hold {group!r}: "
                              f"{choice!r}, which is not a config group and option")
    return {g: c for g, c in choices.items() if c is not None}


def read(resume: str | None) -> dict | None:
    """The group choices saved with the checkpoint ``resume`` names (as
    :func:`trainer_run.runs.resume.prepare` finds it), or None when there is none to read
    (``prepare`` then says why)."""
    if args.is_null(resume):
        return None
    try:
        found = checkpoint.find(Path(resume).expanduser(), require=NEEDED)
        return checked(checkpoint.load_tree(found, NEEDED)["choices"], found)
    except (ConfigError, OSError, ValueError):
        return None
