"""The checks a run's overrides pass before Hydra composes its config, the same for
``trainer-run`` and :func:`trainer_run.train`: the grammar, the group options, the keys a
``+`` adds, a user's ``_target_``; the run directory (named now when none is given, refused
when it is not new or not writable) and a resume (:func:`trainer_run.runs.resume.prepare`).
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import time
from pathlib import Path

from trainer_run import config_upgrade
from trainer_run.compose import argv as args
from trainer_run.compose import override_keys, user_targets
from trainer_run.compose.options import CONFIGS, OPTIONS, root_config
from trainer_run.console import describe, inform, warn
from trainer_run.errors import ConfigError
from trainer_run.runner import lr_find_job, slurm_requeue
from trainer_run.runs import directory as run_directory
from trainer_run.runs import resume as resumes
from trainer_run.storage.yaml_files import read


def checked(argv: list[str]) -> list[str]:
    """``argv`` with a key that moved written by its new name (a note on stderr names it:
    :func:`trainer_run.config_upgrade.renamed`) and a user's ``+<group>._target_`` rewritten
    (:func:`.user_targets.rewrite`), once its grammar, group options and added keys are
    checked."""
    argv, moved = config_upgrade.renamed(argv)
    args.check_grammar(argv)
    check_choices(argv)
    override_keys.check_additions(argv)
    for old in moved:
        inform(f"note: {old} is now {config_upgrade.MOVED[old]}; the old name still works")
    return user_targets.rewrite(argv)


def one_run(argv: list[str]) -> list[str]:
    """The checked ``argv`` of a single run, with its run directory named: a run restarted by
    SLURM resumes itself, a resume is resolved (its directory and config), and a new run's
    directory must be new and writable."""
    argv = name_run_dir(slurm_requeue.continued(argv))
    resume = args.value(argv, "resume")
    if not args.is_null(resume):
        argv = resumes.prepare(argv, resume, report=warn)
        check_writable(Path(args.value(argv, "hydra.run.dir")))
        return argv
    given = args.value(argv, "hydra.run.dir")
    if given and args.value(argv, "debug") == "lr_find":
        lr_find_job.refuse_run(Path(given))
    if given:
        run_directory.check_unused(Path(given), "hydra.run.dir")
    check_writable(Path(given) if given else Path("runs"))
    return argv


def explained(argv: list[str], error: Exception) -> str:
    """One line for the ``error`` Hydra or OmegaConf raised composing the checked ``argv``:
    for a key the config does not have, ours with the closest key (checked only now, so that
    a valid run composes its config once); else the error described."""
    try:
        override_keys.check_overrides(argv)
    except ConfigError as e:
        return str(e)
    return describe(error)


def record_folder(argv: list[str]) -> str | None:
    """Where in a new run directory its record goes: ``.hydra``, or ``hydra.output_subdir``
    (None for ``hydra.output_subdir=null``: no record)."""
    subdir = args.value(argv, "hydra.output_subdir")
    return run_directory.RECORD if subdir is None else None if args.is_null(subdir) else subdir


def check_choices(argv: list[str]) -> None:
    """Refuses an unknown option of a config group (``optimizer=nosuchopt``) with the list
    of available ones (ours and those in a ``--config-dir``) and the closest of them, before
    Hydra composes anything.
    Sweeps (``a,b``) and lists (``logger=[jsonl,csv]``) are checked item by item."""
    folders = args.config_dirs(argv)
    for argument in argv:
        group = args.key(argument).lstrip("+~")
        if "=" not in argument or group not in OPTIONS or "(" in argument:
            continue
        theirs = {p.stem for folder in folders for p in (folder / group).glob("*.yaml")}
        options = sorted({*OPTIONS[group], *theirs})
        items = override_keys.sweep_items(argument.split("=", 1)[1])
        for choice in (name for item in items for name in override_keys.listed(item)):
            if choice not in options:
                close = difflib.get_close_matches(choice, options, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise ConfigError(f"{group}={choice} is not available; {hint}choose one of "
                                  f"{', '.join(options)}{_file_hint(group, choice)}")


def _file_hint(group: str, choice: str) -> str:
    """For ``dataset=<a file>``: how to train on that file."""
    form = FILE_OPTIONS.get(Path(choice.strip("'\"")).suffix.lower()) if group == "dataset" else None
    return f" (to train on the file {choice}: {form.format(choice)})" if form else ""


FILE_OPTIONS = {".npz": "dataset=npz dataset.path={}", ".npy": "dataset=npy dataset.x_path={} "
                "dataset.y_path=<labels.npy>", ".csv": "dataset=csv dataset.path={}"}


def name_run_dir(argv: list[str]) -> list[str]:
    """``argv`` with ``hydra.run.dir`` (``hydra.sweep.dir`` for ``-m``) naming the default
    folder of now, for a new run or sweep with our config that names none (the command then
    knows the folder, and every process of a multi-process run gets the same one): the one a
    chosen preset sets (:func:`preset_folder`; ``debug=lr_find``'s ``lr_find/<date>/<time>``),
    else the config's."""
    multirun = args.is_multirun(argv)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    if (args.value(argv, key) is not None or args.composes_other_config(argv)
            or not args.is_null(args.value(argv, "resume"))):
        return argv
    hydra_section = root_config()["hydra"]
    pattern = (preset_folder(argv, "sweep" if multirun else "run")
               or hydra_section["sweep" if multirun else "run"]["dir"])  # runs/${now:%Y-%m-%d}/...
    named = re.sub(r"\$\{now:([^}]*)\}", lambda m: time.strftime(m.group(1)), pattern)
    return args.with_overrides(argv, f"{key}={args.quote(Path(named))}")


PRESET_ORDER = ("precision", "experiment", "hparams_search", "debug")
"""The preset groups in the order the config's defaults apply them (a later one wins)."""


def preset_folder(argv: list[str], kind: str) -> str | None:
    """The ``hydra.<kind>.dir`` pattern that the last preset chosen in ``argv`` to set one
    sets (its file in a ``--config-dir``, else ours, as Hydra finds it); None when none does."""
    found = None
    for group in PRESET_ORDER:
        choice = args.value(argv, group)
        if args.is_null(choice):
            continue
        path = next((f / group / f"{choice}.yaml" for f in [*args.config_dirs(argv), CONFIGS]
                     if (f / group / f"{choice}.yaml").is_file()), None)
        section = (read(path).get("hydra") or {}).get(kind) or {} if path is not None else {}
        found = section.get("dir") or found
    return found


def nearest_existing(directory: Path) -> Path:
    """``directory`` (absolute) if it exists, else its nearest existing parent."""
    directory = directory.expanduser().absolute()
    while not directory.exists():
        directory = directory.parent
    return directory.resolve()


def check_writable(directory: Path) -> None:
    """Refuses a run directory that could not be created or written, before anything is
    created: its nearest existing folder must be a writable directory."""
    existing = nearest_existing(directory)
    reason = None
    if not existing.is_dir():
        reason = errno.ENOTDIR
    elif os.statvfs(existing).f_flag & os.ST_RDONLY:
        reason = errno.EROFS
    elif not os.access(existing, os.W_OK | os.X_OK):
        reason = errno.EACCES
    if reason is not None:
        raise ConfigError(f"cannot write to {directory}: {os.strerror(reason)}; choose a writable "
                          "hydra.run.dir (or hydra.sweep.dir for -m)")
