"""Config validation before any work starts: the keys given on the command line
(:func:`check_overrides`, from :mod:`.override_keys`), then the type of every field of the
composed config.

:func:`check_types` runs on the resolved config (plain dicts) before anything is built.
A field's type is that of its default in the YAML of the selected option (found by the
section's ``_target_``; a user's ``_target_`` is typed by the group's shared keys only): a
bool must stay a bool, an int an int, a float any real number (finite), a string a string, a
list a list. Fields whose default is null or an interpolation take their type from
:data:`TYPES`. Keys added with ``+`` (arguments of a user ``_target_``) are in no YAML and
are left to their constructor. Ranges belong to the constructors (``check_number``), which
check them before anything is written.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

from trainer_run import kvstore as kvstores
from trainer_run.compose.options import (
    CONFIGS,  # noqa: F401  (re-exported: the files the schema reads)
    GROUPS,
    OPTIONS,
    option_section,
    shared_section,
    top_level,
)
from trainer_run.compose.override_keys import check_overrides  # noqa: F401  (the key check is part of the schema)
from trainer_run.config_upgrade import MOVED
from trainer_run.errors import ConfigError, check


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
    "trainer.max_time": _type("float", "str", "none", description="seconds or DD:HH:MM:SS"),
    "trainer.keep_checkpoints": _type("int", "none"),
    "trainer.*_interval": _type("int", "str", description="an integer number of iterations "
                                "(200) or a number of epochs (1epoch, 0.5epoch)"),
    "trainer.early_stopping.patience": _type("int", "none"),
    "trainer.ema_decay": _type("float", "none"),
    "trainer.swa.start": _type("float", "str", "none", description="a fraction of the run (0.75), "
                               "iterations (1500) or epochs (3epoch)"),
    "trainer.swa.interval": _type("int", "str", description="an integer number of iterations "
                                  "(200) or a number of epochs (1epoch, 0.5epoch)"),
    "trainer.lr_find.early_stop_threshold": _type("float", "none"),
    "model.freeze": _type("list", "str", "none", description="a list of parameter name patterns"),
    "model.lr_mult": _type("dict", "none", description="a mapping from name pattern to multiplier"),
    "model.wd_mult": _type("dict", "none", description="a mapping from name pattern to multiplier"),
    "dataset.overfit_batches": _type("int", "none"),
    "dataset.on_device": _type("bool", "none"),
    "dataset.workers": _type("int"),
    "logger.mlflow.tracking_uri": _type("str", "none", description="a URI or null"),
    "logger.mlflow.run_name": _type("str", "none"),
    "logger.mlflow.tags": _type("dict", "none", description="a mapping of tag names to values"),
    "dataset.transforms": _type("list", "none", description="a list of transform names or "
                                "mappings with _target_"),
    "optimizer.clip_gradient": _type("float", "none"),
    "optimizer.clip_weights": _type("float", "none"),
    "optimizer.lower_bound": _type("float", "none"),
    "optimizer.upper_bound": _type("float", "none"),
    "scheduler.max_update": _type("int", "none"),
    "scheduler.base_lr": _type("float"),
    "updater.max_skipped_in_a_row": _type("int", "none"),
    "updater.clip_global_norm": _type("float", "none"),
    "updater.devices": _type("int", "list", description="an integer or a list of device ids"),
    "backend.threads": _type("int", "none", description="a number of threads or null"),
    "backend.deferred": _type("bool", "none"),
    "updater.callbacks.*": CALLBACK,
    "loss_scale._target_": _type("str", "none", description="a dotted path or null (no loss "
                                 "scaling)"),
    "kvstore.update_on_kvstore": _type("bool", "none"),
    "kvstore.compression.type": _type("str", "none", description="a compression type (2bit) or null"),
    "dataset.*path": _type("str", "none", description="a file name"),
    "dataset.target": _type("str", "int", "none", description="a column name or index"),
    "dataset.features": _type("list", "none", description="a list of column names or indices"),
    "dataset.header": _type("bool", "str", description="auto, true or false"),
    "dataset.root": _type("str", "none", description="a folder"),
    "dataset.vocab_size": _type("int", "none"),
    "dataset.val_tokens": _type("int", "none"),
    "dataset.md5.*": _type("str", "none", description="32 hex digits or null (not checked)"),
    "dataset.train_images": _type("str", "none", description="a file name"),
    "dataset.train_labels": _type("str", "none", description="a file name"),
    "dataset.test_images": _type("str", "none", description="a file name"),
    "dataset.test_labels": _type("str", "none", description="a file name"),
}
"""Fields whose type the YAML default does not tell: null or interpolated defaults, and
fields that take null or a list besides their default's type (``*`` matches any key below)."""


def _candidates(group: str, section: dict) -> list[dict]:
    """The option sections ``section`` comes from: the one(s) with the same ``_target_`` (a
    null one, or none at all as in ``trainer`` and ``logger``, included); else for a user's
    ``_target_`` the group's shared keys (``configs/_<group>.yaml``), and for a ``_target_``
    that is no string all of the group's options (their ``_target_`` then refuses it)."""
    sections = [option_section(group, o) for o in OPTIONS[group]]
    target = section.get("_target_")
    same = [s for s in sections if s.get("_target_") == target]
    return same or ([shared_section(group)] if isinstance(target, str) else sections)



# -- types and ranges ---------------------------------------------------------------------------
def check_types(config: dict) -> None:
    """Refuses a field of the resolved ``config`` whose value has the wrong type or lies out
    breaks the rule between sections; see the module docstring."""
    top = top_level()
    for key, value in config.items():
        if key in GROUPS and isinstance(value, dict):
            _check_section(key, value, _candidates(key, value))
        elif key in top:
            _check_field(key, value, [top[key]])
    _check_moved(config)
    _check_kvstore(config)


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


def _check_moved(config: dict) -> None:
    """Refuses a key that moved (:data:`trainer_run.config_upgrade.MOVED`) still set in its old
    section, which only a config file of the user's can do (the command line's old keys and a
    saved run's are renamed before), naming the new key. A section of the user's own
    ``_target_`` keeps it: its callable may take an argument of that name."""
    for old, new in MOVED.items():
        group, _, name = old.partition(".")
        section = config.get(group)
        if isinstance(section, dict) and name in section and \
                any(s.get("_target_") == section.get("_target_") for s in _candidates(group, section)):
            raise ConfigError(f"{old} is now {new}: a config file sets {old}; set {name} under "
                              f"{new.partition('.')[0]} instead (the old name works on the command "
                              "line only)")


def _check_kvstore(config: dict) -> None:
    """``kvstore.type`` must be one of the kvstore types (:data:`trainer_run.kvstore.TYPES`) or
    ``none``: the rules read it for every run, after the data is loaded."""
    kind = _get(config, "kvstore.type")
    names = sorted([kvstores.NONE, *kvstores.TYPES])
    check(kind is None or str(kind).lower() in names,
          f"kvstore.type={kind!r} is unknown; choose one of {', '.join(names)}")
