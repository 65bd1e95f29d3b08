"""The command line's keys, checked before Hydra composes anything.

:func:`check_overrides` runs on the raw arguments: every ``key=value`` must name a key of the
config those arguments select (the chosen option of each group, its own defaults list and
``# @package _global_`` options included, and the options of a ``--config-dir``), else a
:class:`~trainer_run.errors.ConfigError` suggests the closest key.
"""

from __future__ import annotations

import difflib
import functools

from omegaconf import OmegaConf

from trainer_run.compose import argv as args
from trainer_run.compose import saved_choices, user_targets
from trainer_run.compose.options import CONFIGS, GROUPS, OPTIONS, default_choice, option_section, top_level
from trainer_run.config_upgrade import MOVED
from trainer_run.errors import ConfigError

NOT_CHECKED = ("seed", "resume")
"""Top-level keys of the command line that are always valid (their values are checked later)."""

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


def check_additions(argv: list[str]) -> None:
    """Refuses ``+key=value`` (or ``++``) whose first component is no top-level key, config
    group or ``hydra``: Hydra would add it, and nothing would ever read it."""
    if args.composes_other_config(argv):
        return
    theirs = [p.name for d in args.config_dirs(argv) if d.is_dir() for p in d.iterdir() if p.is_dir()]
    groups = {*GROUPS, *theirs}
    known = {*top_level(), *groups, "hydra"}
    for argument in argv:
        name = args.key(argument)
        if not (name.startswith("+") and "=" in argument and args.is_override(argument)):
            continue
        first = name.lstrip("+").split(".")[0].split("/")[0].split("@")[0]
        if first not in known:
            close = difflib.get_close_matches(first, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"{name.lstrip('+')} is not a config key: the config's top-level "
                              f"keys are {', '.join(sorted(known - {'hydra'}))}{hint}")


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
        options = list(OPTIONS[key]) if "(" in value else [o for o in sweep_items(value) if o]
        chosen.setdefault(key, [])
        chosen[key] += [o for o in options if o not in chosen[key]]
    resume = args.value(argv, "resume")
    if not args.is_null(resume):
        saved = saved_choices.read(resume)
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


def sweep_items(value: str) -> list[str]:
    """The choices of a group's value: ``a,b`` (a sweep) gives ``a`` and ``b``; a list of options
    (``[a,b]``, several at once) is one choice, kept whole."""
    items, depth, current = [], 0, ""
    for char in value:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item.strip().strip("'\"") for item in items]


def listed(choice: str) -> list[str]:
    """The options one choice names: those of a list (``[a,b]``), else the choice itself."""
    if not choice.startswith("["):
        return [choice]
    return [o.strip().strip("'\"") for o in choice.strip("[]").split(",") if o.strip()]


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
    if key in MOVED:
        return f"{key} is not a config key; it is now {MOVED[key]}"
    best = suggest(key, keys)
    if best is not None:
        return f"{key} is not a config key; did you mean {best}?"
    group, _, rest = key.partition(".")
    if group in GROUPS and rest:
        chosen = next((o.split("=", 1)[1] for o in base if o.startswith(f"{group}=")), None)
        chosen = chosen or default_choice(group)
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
    targets = group in user_targets.GROUPS
    hint = f" (an argument of a user _target_ is added with +{key}=...)" if targets else ""
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


