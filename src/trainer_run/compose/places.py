"""The keys of a run's config that name a place outside the run, and whose value counts.

A run folder from someone else is data (:mod:`trainer_run.runs.trust`), and nothing in it may
make trainer-run read or write outside it. Most keys of a config choose how a run trains; a
few name a place: the folder the image sets are downloaded into, the mirrors they come from
and the md5 they are checked against, the tables a dataset reads, the MLflow server the rows
go to. In a config this user did not sign (a stranger's run, a copy edited since, one loaded
with ``trust=true``: that admits its code, not its places), :func:`bounded` gives each such
key the user's own value:

- **Taken from our option** (:data:`OURS`): ``root``, ``mirrors``, ``md5`` and ``examples``
  of the built-in image sets (``mnist``, ``fashion_mnist``, ``cifar10``) and
  ``logger.mlflow.tracking_uri``. The stranger's value is replaced by our config file's:
  the data goes into this user's data folder (``$TRAINER_RUN_DATA``, else the cache), comes
  from the published mirrors and is checked against the published md5; the rows go to
  ``$MLFLOW_TRACKING_URI``, else ``./mlruns``.
- **Inside the run, or given by the user** (:data:`FILES`): the files of ``csv``, ``npz``,
  ``npy``, ``idx`` and ``text`` datasets (a text's ``tokenizer`` when it names a file, not
  ``char`` or ``bpe``: :data:`NAMES`). One outside the run folder (once relative paths are taken
  from the current folder and links are followed) is refused in one line naming the key and
  how to give it.

A key the user's own command sets (``given``: dotted keys, as ``dataset.root``) is the
user's, and kept. A section is known by its ``_target_``, whatever the group's choice is
called, so a stranger cannot rename an option to escape its rule.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path

from trainer_run.compose import options
from trainer_run.errors import ConfigError

IMAGE_SETS = ("mnist", "fashion_mnist", "cifar10")
OURS = {**{("dataset", name): ("root", "mirrors", "md5", "examples") for name in IMAGE_SETS},
        ("logger", "mlflow"): ("tracking_uri",)}
"""(group, option): the keys a config this user did not sign takes from our option."""
FILES = {("dataset", "csv"): ("path", "val_path", "test_path"),
         ("dataset", "npz"): ("path", "val_path", "test_path"),
         ("dataset", "npy"): ("x_path", "y_path", "val_x_path", "val_y_path", "test_x_path",
                              "test_y_path"),
         ("dataset", "idx"): ("train_images", "train_labels", "test_images", "test_labels"),
         ("dataset", "text"): ("path", "tokenizer")}
"""(group, option): the keys naming files, which must lie inside the run unless the user gives
them."""
NAMES = {("dataset", "text", "tokenizer"): ("char", "bpe")}
"""(group, option, key): the values of a file key that name a built-in, not a file."""


def bounded(config: dict, run: Path, source: str, given=()) -> dict:
    """``config`` (resolved, plain containers; changed in place and returned) read from
    ``source`` (the run ``run``'s, named in errors) with each place-naming key bounded as the
    module's docstring says, but for the dotted keys ``given`` by the user's command."""
    outside = []
    for key, section, option in _sections(config):
        for name in OURS.get(option, ()):
            if not _given(f"{key}.{name}", given):
                section[name] = copy.deepcopy(_section(*option)[name])
        outside += [(f"{key}.{name}", section[name]) for name in FILES.get(option, ())
                    if section.get(name) is not None and not _given(f"{key}.{name}", given)
                    and section[name] not in NAMES.get((*option, name), ())
                    and not _inside(section[name], run)]
    if outside:
        named = " and ".join(f"{key}={value}" for key, value in outside)
        them = ("it", "a file") if len(outside) == 1 else ("them", "files")
        raise ConfigError(
            f"{source} is not signed by you and its {named} {'names' if len(outside) == 1 else 'name'} "
            f"{them[1]} outside the run, so trainer-run does not read {them[0]} on the run's word; "
            f"give {them[0]} yourself ({' '.join(f'{key}=<file>' for key, _ in outside)} on the "
            f"command line) to use {them[0]}")
    return config


def _given(key: str, given) -> bool:
    """Whether the user's command set ``key``, a key within it or a section holding it."""
    return any(g == key or g.startswith(f"{key}.") or key.startswith(f"{g}.") for g in given)


def _sections(config: dict):
    """``(dotted key, section, (group, option))`` for each section of ``config`` built by one
    of our options that has bounded keys: ``dataset`` and each ``logger.<name>``."""
    found = [("dataset", config.get("dataset"))]
    loggers = config.get("logger")
    if isinstance(loggers, dict):
        found += [(f"logger.{name}", section) for name, section in loggers.items()]
    for key, section in found:
        if isinstance(section, dict):
            option = _by_target().get((key.split(".")[0], section.get("_target_")))
            if option is not None:
                yield key, section, option


@functools.lru_cache(maxsize=None)
def _by_target() -> dict:
    """(group, ``_target_``) to (group, option) for the options of :data:`OURS` and
    :data:`FILES`."""
    found = {}
    for group, name in (*OURS, *FILES):
        target = _section(group, name).get("_target_")
        found[(group, target)] = (group, name)
    return found


def _section(group: str, name: str) -> dict:
    """The section of our option ``group=name`` (a logger's is under its name)."""
    section = options.option_section(group, name)
    return section[name] if group == "logger" else section


def _inside(value, run: Path) -> bool:
    """Whether the file ``value`` (relative to the current folder, as the datasets read it)
    lies inside the folder ``run`` once links are followed."""
    if not isinstance(value, (str, os.PathLike)):
        return False
    path = os.path.realpath(Path(value).expanduser())
    folder = os.path.realpath(run)
    return os.path.commonpath([path, folder]) == folder
