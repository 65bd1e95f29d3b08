"""A user's own callable in place of a group's option, named on the command line.

``trainer-run +model._target_=my_models.TwoLayer +model.hidden=16`` replaces the chosen
``model`` option with ``my_models.TwoLayer``: its section then holds the ``_target_``, the keys
given for it on the command line and the keys the group shares (``configs/_<group>.yaml``),
never the replaced option's own (``hidden_sizes``). ``+``, ``++`` or neither may prefix such
keys. A config file in the user's folder (``--config-dir ./conf model=mynet``) is an option
like ours and keeps its keys. Either way a section that leaves out a shared key gets the
group's default, so ``.hydra/config.yaml`` records what ran.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from trainer_run.compose import argv as args
from trainer_run.compose.options import shared_section

GROUPS = ("model", "dataset", "optimizer", "scheduler")
"""Groups whose chosen option a user's ``+<group>._target_`` replaces, its own keys dropped
(every group names its callable with ``_target_``; the runner's own, ``backend``, ``updater``,
``loss_scale`` and ``kvstore``, build the runner's machinery and are not offered here)."""


def replaced(overrides: list[str]) -> list[str]:
    """The groups whose ``_target_`` the arguments ``overrides`` set."""
    keys = _keys(overrides)
    return [g for g in GROUPS if f"{g}._target_" in keys]


def _keys(overrides: list[str]) -> set[str]:
    return {args.key(o).lstrip("+~") for o in overrides if "=" in o}


OPEN = ("callbacks",)
"""Sections whose entries are the user's own (``callbacks.<name>.<argument>``): any key under
them is added or replaced, as a resumed run's saved entries are not in our config, and
``~callbacks.<name>`` becomes ``callbacks.<name>=null``, which removes the entry."""


def rewrite(argv: list[str]) -> list[str]:
    """``argv`` with every key of a replaced group, or of an :data:`OPEN` section, written
    ``++group.key=value`` (Hydra adds the key or replaces its value, whichever applies)."""
    groups = [*replaced(argv), *OPEN]
    out = []
    for argument in argv:
        name = args.key(argument)
        if name.startswith("~") and name[1:].split(".")[0] in OPEN and "=" not in argument:
            argument = f"++{name[1:]}=null"  # removed: also an entry only a resumed run has
        bare = name.lstrip("+")
        if "=" in argument and not name.startswith("~") and bare.split(".")[0] in groups and "." in bare:
            argument = f"++{bare}={argument.split('=', 1)[1]}"
        out.append(argument)
    return out


def apply(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The config that runs: each replaced group's section cut down to its ``_target_``, the
    keys ``overrides`` give and the shared keys; every group's missing shared keys filled in
    with their defaults."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    given = _keys(overrides)
    for group in replaced(overrides):
        keep = set(shared_section(group)) | {"_target_"}
        tree[group] = {k: v for k, v in tree[group].items()
                       if k in keep or any(_under(g, f"{group}.{k}") for g in given)}
    for group in GROUPS:
        if isinstance(tree.get(group), dict):
            defaults = shared_section(group)
            tree[group] = {**{k: v for k, v in defaults.items() if k not in tree[group]},
                           **tree[group]}
    return OmegaConf.create(tree)


def _under(key: str, parent: str) -> bool:
    return key == parent or key.startswith(f"{parent}.")
