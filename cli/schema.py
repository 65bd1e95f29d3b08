"""Config validation before any work starts: the keys given on the command line, then the
type of every field of the composed config and the ranges no constructor checks.

:func:`check_overrides` runs on the raw arguments before Hydra composes anything: every
``key=value`` must name a key of the config those arguments select (the chosen option of
each group, its own defaults list and ``# @package _global_`` options included), else a
:class:`~trainer_run.errors.ConfigError` suggests the closest key.

:func:`check_types` runs on the resolved config (plain dicts) before anything is built.
A field's type is that of its default in the YAML of the selected option (found by the
section's ``name``): a bool must stay a bool, an int an int, a float any real number
(finite), a string a string, a list a list. Fields whose default is null or an
interpolation take their type from :data:`TYPES`. Keys added with ``+`` (arguments of a
user ``_target_``) are in no YAML and are left to their constructor. Ranges belong to the
constructors (``check_number``); :data:`RANGES` covers the fields none of them checks.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from trainer_run.errors import ConfigError, check, check_number

from . import argv as args
from . import resume as resumes

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
GROUPS = tuple(sorted(p.name for p in CONFIGS.iterdir() if p.is_dir() and any(p.glob("*.yaml"))))
OPTIONS = {group: tuple(sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))) for group in GROUPS}
NOT_CHECKED = ("seed", "resume")
"""Top-level keys of the command line that are always valid (their values are checked later)."""


@dataclass(frozen=True)
class Type:
    """The kinds a field accepts (``bool int float str list dict none``) and their wording."""

    kinds: frozenset
    description: str


_WORDS = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
          "list": "a list", "dict": "a mapping"}


def _type(*kinds: str, description: str | None = None) -> Type:
    words = [_WORDS[k] for k in ("bool", "float", "int", "str", "list", "dict")
             if k in kinds and not (k == "int" and "float" in kinds)]
    return Type(frozenset(kinds), description or " or ".join(words))


CALLBACK = _type("str", "dict", "list", "none",
                 description="a dotted name, a mapping with _target_ or a list of these")
TYPES = {
    "resume": _type("str", "none", description="a run or checkpoint directory"),
    "trainer.max_iterations": _type("int", "none"),
    "trainer.max_epochs": _type("float", "none"),
    "trainer.keep_checkpoints": _type("int", "none"),
    "trainer.max_skipped_in_a_row": _type("int", "none"),
    "optimizer.clip_gradient": _type("float", "none"),
    "optimizer.clip_weights": _type("float", "none"),
    "optimizer.lower_bound": _type("float", "none"),
    "optimizer.upper_bound": _type("float", "none"),
    "scheduler.max_update": _type("int", "none"),
    "scheduler.base_lr": _type("float"),
    "updater.devices": _type("int", "list", description="an integer or a list of device ids"),
    "updater.callbacks.*": CALLBACK,
    "kvstore.update_on_kvstore": _type("bool", "none"),
    "kvstore.compression.type": _type("str", "none", description="a compression type (2bit) or null"),
}
"""Fields whose type the YAML default does not tell: null or interpolated defaults, and
fields that take null or a list besides their default's type (``*`` matches any key below)."""

RANGES = {
    "dataset.noise": dict(low=0),
    "dataset.spread": dict(low=0),
    "dataset.turns": dict(low=0, low_open=True),
    "dataset.n_features": dict(low=1, integer=True),
    "dataset.n_classes": dict(low=2, integer=True),
    "dataset.n_targets": dict(low=1, integer=True),
}
"""Ranges of the numeric fields no constructor checks (the synthetic datasets' options)."""

USER_TARGETS = ("model", "dataset", "optimizer")
"""Sections that may name a user ``_target_``, whose extra arguments are added with ``+``."""

DIVIDE_BY_LR = {"trainer_run.optimizers.FTML": "ftml", "trainer_run.optimizers.Ftrl": "ftrl"}
"""Optimizers whose update divides by the learning rate (a schedule must never reach 0), by
``_target_``, with their option's name."""


# -- command-line keys ----------------------------------------------------------------------
def check_overrides(argv: list[str]) -> None:
    """Refuses a ``key=value`` argument whose key the selected config does not have, with
    the closest key as a suggestion. Additions (``+key``, ``++key``), deletions (``~key``),
    ``hydra.*``, flags, ``seed``/``resume`` and group choices are not checked here."""
    argv = [str(a) for a in argv]
    if args.composes_other_config(argv):
        return
    keys = [k for k in map(_override_key, argv) if k is not None]
    if not keys:
        return
    selections = _selections(argv)
    if selections is None:
        return
    extra = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in args.config_dirs(argv))}]"]
    known = _known_keys(tuple(tuple([*s, *extra]) for s in selections))
    if known is None:  # Hydra cannot compose these arguments; it will say why itself
        return
    keys_, lists = known
    for key in keys:
        parent, _, last = key.rpartition(".")
        if key in keys_ or (parent in lists and last.isdigit()):
            continue
        raise ConfigError(_unknown(key, keys_, selections[0]))


def _override_key(argument: str) -> str | None:
    """The key an argument sets, or None when it is not a ``key=value`` override to check."""
    if argument.startswith("-") or "=" not in argument:
        return None
    key = argument.split("=", 1)[0].strip()
    if (not key or key[0] in "+~" or key == "hydra" or key.startswith("hydra.") or "/" in key
            or "@" in key or key in NOT_CHECKED or key in GROUPS):
        return None
    return key


def _selections(argv: list[str]) -> list[list[str]] | None:
    """Override lists to compose: the group choices (first option of each sweep) and, for
    every further option of a sweep, the same with that option. None: a resume whose run
    cannot be read (``prepare`` reports it)."""
    chosen: dict[str, list[str]] = {}
    deleted = []
    for argument in argv:
        key, _, value = argument.partition("=")
        if key.startswith("~") and key[1:] in GROUPS:
            deleted.append(f"~{key[1:]}")
        if key not in GROUPS or "=" not in argument:
            continue
        options = (list(OPTIONS[key]) if "(" in value else
                   [v.strip().strip("'\"") for v in value.split(",") if v.strip()])
        chosen.setdefault(key, [])
        chosen[key] += [o for o in options if o not in chosen[key]]
    resume = args.value(argv, "resume")
    if not args.is_null(resume):
        saved = resumes.saved_choices(resume)
        if saved is None:
            return None
        for group, choice in saved.items():
            if group in GROUPS and group not in chosen and choice:
                chosen[group] = [str(choice)]
    base = [f"{group}={options[0]}" for group, options in chosen.items() if options] + deleted
    selections = [base]
    for group, options in chosen.items():
        for option in options[1:]:
            selections.append([f"{group}={option}" if o.startswith(f"{group}=") else o
                               for o in base])
    return selections


@functools.lru_cache(maxsize=64)
def _known_keys(selections: tuple) -> tuple[dict, frozenset] | None:
    """Every dotted key (sections and leaves, in config order) of the configs composed
    from ``selections``, and the keys holding lists; None if Hydra cannot compose them."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    keys: dict[str, None] = {}
    lists: set[str] = set()
    try:
        # the context manager clears Hydra's global state, so hydra.main can run afterwards
        with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
            for overrides in selections:
                cfg = compose("config", overrides=list(overrides))
                _walk(OmegaConf.to_container(cfg, resolve=False), "", keys, lists)
    except (HydraException, OmegaConfBaseException):
        return None
    return keys, frozenset(lists)


def _walk(node: dict, prefix: str, keys: dict, lists: set) -> None:
    for name, value in node.items():
        key = f"{prefix}{name}"
        keys[key] = None
        if isinstance(value, dict):
            _walk(value, f"{key}.", keys, lists)
        elif isinstance(value, list):
            lists.add(key)


def _children(parent: str, keys) -> list[str]:
    depth = parent.count(".") + 1 if parent else 0
    prefix = f"{parent}." if parent else ""
    return [k.split(".")[depth] for k in keys if k.startswith(prefix) and k.count(".") == depth]


def suggest(key: str, keys) -> str | None:
    """The known key closest to ``key``, matched one dotted component at a time with
    :func:`difflib.get_close_matches` (so ``optimzer.learnig_rate`` finds
    ``optimizer.learning_rate``), or None."""
    found: list[str] = []
    for part in key.split("."):
        children = _children(".".join(found), keys)
        if part not in children:
            close = difflib.get_close_matches(part, children, n=1, cutoff=0.6)
            if not close:
                return None
            part = close[0]
        found.append(part)
    best = ".".join(found)
    return best if best != key and best in keys else None


def _unknown(key: str, keys: dict, base: list[str]) -> str:
    best = suggest(key, keys)
    if best is not None:
        return f"{key} is not a config key; did you mean {best}?"
    group, _, rest = key.partition(".")
    if group in GROUPS and rest:
        chosen = next((o.split("=", 1)[1] for o in base if o.startswith(f"{group}=")), None)
        chosen = chosen or _default_choice(group)
        owners = [o for o in OPTIONS[group] if rest in _flat(option_section(group, o))]
        if owners:
            return (f"{key} is not a config key with {group}={chosen}; these {group} options "
                    f"have it: {', '.join(owners)}")
    parent = key
    while parent and parent not in keys:
        parent = parent.rpartition(".")[0]
    if parent and parent not in _sections(keys):
        return f"{key} is not a config key; {parent} is a value, not a section"
    children = _children(parent, keys)
    where = f"{parent} has" if parent else "the config has"
    hint = f" (an argument of a user _target_ is added with +{key}=...)" if group in USER_TARGETS else ""
    return f"{key} is not a config key; {where} {', '.join(children)}{hint}"


def _sections(keys) -> set[str]:
    return {k.rpartition(".")[0] for k in keys}


def _flat(section: dict, prefix: str = "") -> set[str]:
    out = set()
    for name, value in section.items():
        out.add(f"{prefix}{name}")
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{name}.")
    return out


# -- the options' YAML files ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _top_level() -> dict:
    tree = OmegaConf.to_container(OmegaConf.load(CONFIGS / "config.yaml"), resolve=False)
    return {k: v for k, v in tree.items() if k not in ("defaults", "hydra")}


@functools.lru_cache(maxsize=None)
def _default_choice(group: str) -> str | None:
    tree = OmegaConf.to_container(OmegaConf.load(CONFIGS / "config.yaml"), resolve=False)
    for entry in tree.get("defaults", []):
        if isinstance(entry, dict) and group in entry:
            return entry[group]
    return None


@functools.lru_cache(maxsize=None)
def option_section(group: str, option: str) -> dict:
    """The section ``group=option`` puts into the config, with the option's own defaults
    list (other options of the same group) merged in and, for a ``# @package _global_``
    option, only the part under ``group``."""
    path = CONFIGS / group / f"{option}.yaml"
    tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
    defaults = tree.pop("defaults", [])
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    own = tree.get(group, {}) if any("@package _global_" in line for line in header) else tree
    merged: dict = {}
    if "_self_" not in defaults:
        defaults = [*defaults, "_self_"]
    for entry in defaults:
        if entry == "_self_":
            merged = _merge(merged, own)
        elif isinstance(entry, str) and entry.startswith("/"):  # /_<group>@_here_: shared keys
            shared = CONFIGS / f"{entry[1:].split('@')[0]}.yaml"
            merged = _merge(merged, OmegaConf.to_container(OmegaConf.load(shared), resolve=False))
        elif isinstance(entry, str):  # another option of this group; dicts pick other groups
            merged = _merge(merged, option_section(group, entry))
    return merged


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _candidates(group: str, section: dict) -> list[dict]:
    """The option sections ``section`` comes from: the one(s) building the same ``_target_``
    (for a user's, the group's shared keys: ``configs/_<group>.yaml``), else the one(s)
    with the same ``name``, else all of the group's options."""
    sections = [option_section(group, o) for o in OPTIONS[group]]
    target = section.get("_target_")
    if isinstance(target, str):
        return [s for s in sections if s.get("_target_") == target] or [_shared(group)]
    name = str(section.get("name", "")).lower()
    return [s for s in sections if str(s.get("name", "")).lower() == name] or sections


@functools.lru_cache(maxsize=None)
def _shared(group: str) -> dict:
    path = CONFIGS / f"_{group}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) if path.exists() else {}


# -- types and ranges ---------------------------------------------------------------------------
def check_types(config: dict) -> None:
    """Refuses a field of the resolved ``config`` whose value has the wrong type or lies out
    of the ranges checked here; see the module docstring."""
    top = _top_level()
    for key, value in config.items():
        if key in GROUPS and isinstance(value, dict):
            _check_section(key, value, _candidates(key, value))
        elif key in top:
            _check_field(key, value, [top[key]])
    for key, limits in RANGES.items():
        value = _get(config, key)
        if value is not None:
            check_number(key, value, **limits)
    _check_kvstore(config)
    _check_schedule(config)


def _check_section(prefix: str, section: dict, candidates: list[dict]) -> None:
    for name, value in section.items():
        key = f"{prefix}.{name}"
        defaults = [c[name] for c in candidates if name in c]
        if _declared(key) is None and any(isinstance(d, dict) for d in defaults):
            if isinstance(value, dict):
                _check_section(key, value, [d for d in defaults if isinstance(d, dict)])
            elif value is not None:  # null empties a mapping (updater.callbacks=null)
                raise ConfigError(f"{key} must be a mapping, got {value!r}")
            continue
        _check_field(key, value, defaults)


def _declared(key: str) -> Type | None:
    if key in TYPES:
        return TYPES[key]
    return next((t for pattern, t in TYPES.items() if fnmatch.fnmatchcase(key, pattern)), None)


def field_type(key: str, defaults: list) -> Type | None:
    """The type of field ``key`` given its defaults in the candidate options; None when
    unknown (a key added with ``+``, or a null default missing from :data:`TYPES`)."""
    declared = _declared(key)
    if declared is not None:
        return declared
    kinds = [_kind(d) for d in defaults]
    if not kinds or None in kinds:
        return None
    return _type(*kinds)


def _kind(value) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return None if "${" in value else "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return None


def _check_field(key: str, value, defaults: list) -> None:
    expected = field_type(key, defaults)
    if expected is None:
        return
    kind = "none" if value is None else "str" if isinstance(value, str) else _kind(value)
    accepted = expected.kinds | ({"int"} if "float" in expected.kinds else set())
    if kind not in accepted:
        raise ConfigError(f"{key} must be {expected.description}, got {value!r}")
    if kind == "float" and not math.isfinite(value):
        raise ConfigError(f"{key} must be a finite number, got {value!r}")


def _get(config: dict, key: str):
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _check_kvstore(config: dict) -> None:
    """``kvstore.name`` is read only by the parallel updater; check it for every run."""
    name = _get(config, "kvstore.name")
    names = [str(option_section("kvstore", o).get("name")) for o in OPTIONS.get("kvstore", ())]
    check(name is None or name in names,
          f"kvstore.name={name!r} is unknown; choose one of {', '.join(names)}")


def _check_schedule(config: dict) -> None:
    """FTML and FTRL divide by the learning rate: refuse a schedule that brings it to 0."""
    optimizer, scheduler = config.get("optimizer"), config.get("scheduler")
    if not (isinstance(optimizer, dict) and isinstance(scheduler, dict)):
        return
    name = DIVIDE_BY_LR.get(optimizer.get("_target_"))
    if name is None:
        return
    kind = str(scheduler.get("_target_", "")).rpartition(".")[2].lower()

    def refuse(field: str, when: str) -> None:
        value = scheduler.get(field, 0)
        raise ConfigError(f"scheduler.{field} must be > 0 with optimizer={name}, which divides by "
                          f"the learning rate ({when}), got {value!r}")

    if kind in ("cosinescheduler", "polyscheduler") and scheduler.get("final_lr", 0) == 0:
        refuse("final_lr", "the schedule ends at final_lr")
    if (scheduler.get("warmup_mode", "linear") == "constant" and scheduler.get("warmup_steps", 0)
            and scheduler.get("warmup_begin_lr", 0) == 0):
        refuse("warmup_begin_lr", "a constant warmup stays at warmup_begin_lr")
    floors = {"factorscheduler": "stop_factor_lr", "reduceonplateauscheduler": "min_lr",
              "multifactorscheduler": None}
    if kind in floors and scheduler.get("factor", 1) == 0:
        floor = floors[kind]
        if floor is None:
            refuse("factor", "every reduction multiplies it by factor")
        if scheduler.get(floor, 0) == 0:
            refuse(floor, "factor=0 brings it down to this floor")
