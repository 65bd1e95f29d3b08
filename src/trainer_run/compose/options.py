"""Our config files: the groups, their options, and the section each option puts into the config.

``configs/<group>/<option>.yaml`` is an option of a group; ``configs/_<group>.yaml`` holds the
keys every option of the group shares (each option lists it in its defaults as
``/_<group>@_here_``). A *preset* group (:data:`PRESETS`) has no section of its own: its
options are ``# @package _global_`` files that set other groups' keys or Hydra's (``precision``
sets ``backend.dtype`` and, for fp16, the optimizer's master weights and the loss scaling).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from trainer_run.storage.yaml_files import read

CONFIGS = Path(str(resources.files("trainer_run.configs"))).resolve()
"""Our config folder: package data (``trainer_run.configs``), as Hydra's search path names it."""
ROOT = CONFIGS / "config.yaml"
"""The primary config of the config folder (Hydra's ``config_name``)."""
GROUPS = tuple(sorted(p.name for p in CONFIGS.iterdir() if p.is_dir() and any(p.glob("*.yaml"))))
OPTIONS = {group: tuple(sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))) for group in GROUPS}
PRESETS = ("debug", "experiment", "hparams_search", "precision")


@functools.lru_cache(maxsize=None)
def shared_section(group: str) -> dict:
    """The keys every option of ``group`` shares with their defaults (``configs/_<group>.yaml``;
    empty for a group without one)."""
    path = CONFIGS / f"_{group}.yaml"
    return read(path) if path.exists() else {}


@functools.lru_cache(maxsize=None)
def root_config() -> dict:
    """``configs/config.yaml`` as written (read once; not to be changed by its readers)."""
    return read(ROOT)


@functools.lru_cache(maxsize=None)
def top_level() -> dict:
    return {k: v for k, v in root_config().items() if k not in ("defaults", "hydra")}


@functools.lru_cache(maxsize=None)
def default_choice(group: str) -> str | None:
    for entry in root_config().get("defaults", []):
        if isinstance(entry, dict) and group in entry:
            return entry[group]
    return None


@functools.lru_cache(maxsize=None)
def option_section(group: str, option: str, path: Path | None = None) -> dict:
    """The section ``group=option`` puts into the config, with the option's own defaults
    list (other options of the same group) merged in and, for a ``# @package _global_``
    option, only the part under ``group``. ``path``: the option's file when it is not ours
    (a ``--config-dir``'s); the options it lists come from its folder, else from ours."""
    path = path or CONFIGS / group / f"{option}.yaml"
    tree = read(path)
    defaults = tree.pop("defaults", [])
    own = tree.get(group, {}) if is_global(path) else tree
    merged: dict = {}
    if "_self_" not in defaults:
        defaults = [*defaults, "_self_"]
    for entry in defaults:
        if entry == "_self_":
            merged = _merge(merged, own)
        elif isinstance(entry, str) and entry.startswith("/"):  # /_<group>@_here_: shared keys
            merged = _merge(merged, shared_section(entry[2:].split("@")[0]))
        elif isinstance(entry, str):  # another option of this group; dicts pick other groups
            sibling = path.parent / f"{entry}.yaml"
            merged = _merge(merged, option_section(group, entry, sibling if sibling.exists() else None))
    return merged


def is_global(path: Path) -> bool:
    """Whether the config file at ``path`` is a ``# @package _global_`` one (Hydra reads the
    directive in the comments that open the file)."""
    return any("@package _global_" in line for line in opening_comments(path))


def opening_comments(path: Path) -> list[str]:
    """The comment lines that open the file at ``path``, up to its first other line."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


def _merge(base: dict, top: dict) -> dict:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


