"""``resume=``: which checkpoint, which run directory, and what a resume may change.

``trainer-run resume=<run or checkpoint dir> [overrides]`` finds the checkpoint (the run's
latest complete one, or the one named), rebuilds the run from the config saved in it with
the overrides applied on top, and loads its state. The state is what training has
accumulated: parameters, optimizer moments and counters, how far the schedule has got,
the data order and position, random generators, a dynamic loss scale, the log. Every
hyper-parameter comes from the config. So an override takes effect from the resumed
iteration, with these exceptions, refused in one line because the checkpoint's state
would mean something else (it would be another run; start a new one):

- a config group (``optimizer=sgd``),
- :data:`FIXED`: ``seed``, ``model.*``, ``dataset.*`` other than ``dataset.batch_size`` and
  where the image sets come from (``root``, ``mirrors``, ``timeout``, ``time_limit``),
  ``optimizer.multi_precision``, ``backend.dtype`` (the ``precision`` group's).

Where it writes: into the run that owns the checkpoint (``<run>`` for
``<run>/checkpoints/iter_<N>``, when ``<run>`` holds a run's record:
:func:`trainer_run.runs.directory.is_run`). A checkpoint kept anywhere else, or copied into a
folder that is not a run, belongs to no run and needs ``hydra.run.dir=<new dir>``; naming a
new ``hydra.run.dir`` also continues any checkpoint there as a new run, leaving the old one
untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from trainer_run import stored_config
from trainer_run.compose import argv as args
from trainer_run.compose import config_dirs, options, saved_choices
from trainer_run.config_upgrade import renamed, upgrade
from trainer_run.console import describe
from trainer_run.errors import ConfigError
from trainer_run.runs import checkpoint_tree, trust
from trainer_run.runs import directory as run_directory
from trainer_run.storage import checkpoint, run_files, yaml_files

FIXED = ("seed", "model", "dataset", "optimizer.multi_precision", "backend.dtype", "init_from",
         "init_from_strict")
"""Keys (and the keys below them) a resume refuses to change."""
ANY_TIME = ("dataset.batch_size", "dataset.root", "dataset.mirrors", "dataset.timeout",
            "dataset.time_limit", "dataset.workers")
"""Exceptions to :data:`FIXED`: where the image sets come from (their md5 or content is
checked, so the data is the same), and the threads that gather the batches (which give the
batches of a run without them, as ``updater.prefetch`` does)."""
RECORD_CONFIG = Path(run_files.RECORD) / run_files.CONFIG
"""Where a run records the config it was started with."""


def prepare(argv: list[str], resume: str, report: Callable[[str], None]) -> list[str]:
    """The arguments of the resumed run: the run's group choices pinned (another choice is
    refused), ``resume`` naming the checkpoint and ``hydra.run.dir`` the run to write into.
    The checkpoint's content is checked as far as it can be without the model
    (:func:`trainer_run.runs.checkpoint_tree.check`); the shapes of its parameters are checked once
    the run is built (:func:`.lifecycle.build`), which falls back the same way."""
    path = Path(resume).expanduser()
    try:
        found = checkpoint.find(path, report=report, require=checkpoint.RUN_STATE,
                                check=checkpoint_tree.check)
    except checkpoint.CheckpointError:
        raise
    except ConfigError:
        if not _started_only(path):
            raise
        return _start_again(argv, path, report)
    tree = checkpoint.load_tree(found, checkpoint.RUN_STATE)
    stored = from_checkpoint(tree, found)
    vet(stored, trusted(argv))
    choices = saved_choices.checked(tree["choices"], found)
    config_dirs.check_found(choices, argv, run_directory.owner(found) if stored.mine() else None)
    run_dir = _run_dir(found, args.value(argv, "hydra.run.dir"))
    rest = args.without(argv, "resume", "hydra.run.dir")
    for group, choice in choices.items():
        given = args.value(rest, group)
        if given is not None and given != choice:
            raise ConfigError(f"resume keeps the run's {group}={choice}; {group}={given} would be "
                              "a different run, so start a new one instead")
    pinned = [f"{g}={c}" for g, c in choices.items() if args.value(rest, g) is None]
    return args.with_overrides(rest, *pinned, f"resume={args.quote(found.resolve())}",
                               f"hydra.run.dir={args.quote(run_dir)}")


def _started_only(path: Path) -> bool:
    """Whether ``path`` is a run (our record) that wrote no checkpoint: one killed before its
    first (at most a partial one in a temporary folder). A run whose checkpoints are all
    damaged did train, and is refused instead."""
    return (run_directory.is_run(path) and (path / RECORD_CONFIG).is_file()
            and not checkpoint.list_checkpoints(path / run_directory.CHECKPOINTS))


def _start_again(argv: list[str], run: Path, report: Callable[[str], None]) -> list[str]:
    """The arguments that start the run ``run``, killed before its first checkpoint, again
    from its first iteration: its saved config (``.hydra/config.yaml``, trusted as a
    checkpoint's is: :func:`vet`) with this command's overrides on top, its group
    choices pinned, writing into ``run``."""
    stored = from_record(run / RECORD_CONFIG)
    vet(stored, trusted(argv))
    run_directory.check_free(run)
    choices = saved_choices.checked(_recorded_choices(run), run / RECORD_CONFIG)
    config_dirs.check_found(choices, argv, run if stored.mine() else None)
    rest = args.without(argv, "resume", "hydra.run.dir")
    pinned = [f"{g}={c}" for g, c in choices.items() if args.value(rest, g) is None]
    report(f"{run} has no complete checkpoint (it stopped before its first): starting it again "
           "from iteration 0 with its saved config")
    return args.with_overrides(rest, *pinned, f"resume={args.quote((run / RECORD_CONFIG).resolve())}",
                               f"hydra.run.dir={args.quote(run.resolve())}")


def resumed(iteration: int, found: Path) -> str:
    """A resumed run's first line: the iteration it continues from and the checkpoint."""
    return f"resumed from iteration {iteration} (checkpoint {found})"


def recorded_overrides(path: Path) -> list[str]:
    """The overrides Hydra recorded beside the config ``path`` (``.hydra/overrides.yaml``): the
    record of a run started again, never applied."""
    try:
        recorded = yaml_files.read_run(path.with_name(run_files.OVERRIDES), path.parent.parent)
    except (OSError, ValueError, yaml.YAMLError):
        return []
    return [str(o) for o in recorded] if isinstance(recorded, list) else []


def _recorded_choices(run: Path) -> dict:
    """The group choices Hydra recorded for ``run`` (``.hydra/hydra.yaml``), ours only."""
    try:
        hydra = yaml_files.read_run(run / run_files.RECORD / run_files.HYDRA, run)
        choices = hydra["hydra"]["runtime"]["choices"]
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return {}
    return {g: c for g, c in choices.items() if isinstance(g, str) and not g.startswith("hydra")}


def trusted(argv: list[str]) -> bool:
    """Whether the command says ``trust=true``: run the code the resumed run's config names
    though this user did not sign it (:mod:`trainer_run.runs.trust`). A value that is not a
    boolean (``trust=yes``) is refused, as the config's type check refuses it in a new run."""
    given = [a for a in argv if "=" in a and args.key(a).lstrip("+~") == "trust"]
    return args.boolean(given[-1]) if given else False


def _run_dir(found: Path, given: str | None) -> Path:
    owner = run_directory.owner(found)
    if given is not None:
        target = Path(given).expanduser().resolve()
        if target != owner:
            run_directory.check_unused(target)  # a new run continuing from the checkpoint
        return target
    if owner is None:
        raise ConfigError(f"checkpoint {found} {_not_in_a_run(found)}, so it belongs to no run; "
                          "continue it as a new run with hydra.run.dir=<new directory>")
    run_directory.check_free(owner)
    return owner


def _not_in_a_run(found: Path) -> str:
    """Why the checkpoint ``found`` has no run (:func:`trainer_run.runs.directory.owner`)."""
    folder = run_directory.checkpoints_folder_of(found)
    if folder is None:
        return "is not in a run's checkpoints folder"
    return (f"is in {folder}, which is not a run (it has no {run_directory.RECORD}/"
            f"{run_directory.MARK} of trainer-run's, nor your signature on its config)")


@dataclass
class Stored:
    """A config read from a run (a checkpoint's or the run's record), the bytes its signature
    covers, that signature (None: unsigned), where it was read (named in errors) and the folder
    of the run it belongs to (the checkpoint's, for one kept outside a run)."""

    config: dict
    data: bytes
    signature: str | None
    source: str
    folder: Path

    def mine(self) -> bool:
        """Whether this user signed it (:func:`trainer_run.runs.trust.signed_by_me`)."""
        return trust.signed_by_me(self.data, self.signature)


def vet(stored: Stored, trusted_run: bool) -> None:
    """Refuses, before anything is written, a ``stored`` config the user did not vouch for
    (signed, or ``trusted_run``) that names code once resolved on its own
    (:func:`trainer_run.stored_config.resolve`); :func:`resolved` checks it again with the
    command's overrides."""
    if not (trusted_run or stored.mine()):
        trust.refuse_code(stored_config.resolve(stored.config, stored.source), stored.source)


def from_checkpoint(state: dict, path) -> Stored:
    """The config a run checkpoint's state holds."""
    folder = run_directory.checkpoints_folder_of(Path(path)) or Path(path).resolve().parent
    return Stored(state.get("config") or {}, trust.checkpoint_data(state), state.get(trust.SIGNATURE),
                  f"checkpoint {path}", folder)


def from_record(path: Path) -> Stored:
    """The config a run recorded in ``path`` (``.hydra/config.yaml``)."""
    config, data, signed = trust.read_record(path)
    return Stored(config, data, signed, f"run {path.parent.parent}", path.parent.parent)


def config(stored: Stored, cfg: DictConfig, overrides: list[str], choices: dict,
           vouched: bool) -> DictConfig:
    """The ``stored`` config (in today's form: :func:`trainer_run.config_upgrade.upgrade`)
    with the command's ``overrides`` applied (their values as Hydra composed them in ``cfg``);
    group choices are already the run's. Unless the user ``vouched`` for it (signed it, or
    ``trust=true``), its interpolations are first checked as :func:`resolved` will resolve
    them, so that nothing in it is resolved before."""
    if not vouched:
        stored_config.check(stored.config, stored.source)
    node = OmegaConf.create(upgrade(stored.config))
    _add_new_keys(node, cfg)
    _name_logger_targets(node)
    before = OmegaConf.to_container(node, resolve=False)  # the run's values, as stored
    for name in command_keys(overrides, choices):
        new = OmegaConf.select(cfg, name)
        _check_changeable(name, _raw(before, name), new)
        OmegaConf.update(node, name, new, force_add=True)
    return node


def command_keys(overrides: list[str], choices: dict) -> list[str]:
    """The keys the command's ``overrides`` set in a resumed config: not ``resume``, Hydra's,
    nor the group ``choices`` a resume pins."""
    names = (args.key(override).lstrip("+~") for override in overrides)
    return [n for n in names if n != "resume" and not n.startswith("hydra.") and n not in choices]


def resolved(node: DictConfig, stored: Stored | None, vouched: bool, command: list[str]) -> dict:
    """The config to build: ``node`` resolved. A config read from a run the user did not vouch
    for (neither signed by them nor ``trust=true``) is resolved with references between its
    keys only (:func:`trainer_run.stored_config.resolve`), and then refused
    (:class:`trainer_run.runs.trust.UntrustedRun`) if it names code, but for the keys the command
    set (``command``: :func:`command_keys`): what is checked is what is built."""
    if stored is None or vouched:
        try:
            return OmegaConf.to_container(node, resolve=True)
        except RecursionError:
            raise ConfigError("the config's interpolations nest too deeply (a cycle?)") from None
        except OmegaConfBaseException as e:
            raise ConfigError(describe(e)) from None
    tree = stored_config.resolve(OmegaConf.to_container(node, resolve=False), stored.source)
    trust.refuse_code(tree, stored.source, exempt=command)
    return tree


def _raw(tree: dict, name: str):
    """The value at the dotted key ``name`` of ``tree`` as stored (interpolations unresolved),
    or None."""
    for part in name.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def _add_new_keys(node: DictConfig, cfg: DictConfig) -> None:
    """Adds to the checkpoint's config the keys this version has and it lacks (a run saved
    before ``trainer.profile`` or ``logger`` existed), with their defaults as composed in
    ``cfg``: top-level keys, the ``trainer`` group's (it has one option) and the keys every
    option of a group shares (``configs/_<group>.yaml``). An option's own keys are left as
    saved: the run's section may be another option's, or the user's own ``_target_``'s."""
    for key in cfg:
        if key not in node:
            OmegaConf.update(node, key, cfg[key], force_add=True)
    sections = {group: list(options.shared_section(group)) for group in options.GROUPS}
    sections["trainer"] = list(cfg.get("trainer", {}))
    for group, keys in sections.items():
        for key in keys:
            if group in node and OmegaConf.is_dict(node[group]) and key not in node[group] \
                    and key in cfg.get(group, {}):
                OmegaConf.update(node, f"{group}.{key}", cfg[group][key], force_add=True)


def _name_logger_targets(node: DictConfig) -> None:
    """Gives each logger of a run saved before loggers named their ``_target_`` (``logger:
    {csv: {delimiter: ","}}``) the target of our option of that name."""
    for name, section in (node.get("logger") or {}).items():
        if name in options.OPTIONS.get("logger", ()) and "_target_" not in (section or {}):
            target = options.option_section("logger", name)[name]["_target_"]
            OmegaConf.update(node, f"logger.{name}._target_", target, force_add=True)


def _check_changeable(name: str, old, new) -> None:
    fixed = any(name == f or name.startswith(f + ".") for f in FIXED) and name not in ANY_TIME
    if fixed and _plain(old) != _plain(new):
        raise ConfigError(f"resume keeps the run's {name}={_plain(old)}; {name}={_plain(new)} would "
                          "make a different run (its checkpoint was trained with the other), so "
                          "start a new one instead")


def _plain(value):
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def merged(before: list[str], now: list[str], choices: dict) -> list[str]:
    """The run's overrides after a resume: those it started with (``before``), each replaced
    by this command's override of the same key, then this command's new ones; ``resume``,
    ``hydra.*`` and the group ``choices`` a resume pins (:func:`prepare`) are not the user's.
    An old key of ``before`` is written by its new name (:func:`~trainer_run.config_upgrade.renamed`)."""
    pinned = {f"{group}={choice}" for group, choice in choices.items()}
    mine = [o for o in now if not (args.key(o).lstrip("+~") == "resume" or o in pinned
                                   or args.key(o).lstrip("+~").startswith("hydra."))]
    given = {args.key(o).lstrip("+~"): o for o in mine}
    kept = [given.pop(args.key(o).lstrip("+~"), o) for o in renamed(before)[0]]
    return [*kept, *given.values()]
