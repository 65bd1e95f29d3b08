"""Calling what a config section names: its ``_target_`` with the section's keys, checked.

A section of the ``model``, ``dataset``, ``optimizer`` and ``scheduler`` groups names the
callable that builds its object with ``_target_`` (a dotted path, Hydra's ``instantiate``
convention; the folder the command runs from is importable). :func:`instantiate` calls it
with

- the section's own keys: every one must be an argument of the callable, else one line
  names the key and the callable's signature;
- the keys the group shares (``configs/_<group>.yaml``) that the callable takes;
- the standard arguments the runner supplies (``in_size``, ``in_shape``, ``out_size``, ``backend``,
  ``dtype``, ``task``, ``rng``, ``lr_scheduler``), each only when the callable takes it.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re

from trainer_run.errors import ConfigError

from .options import shared_section


def locate(path, key: str):
    """The object the dotted ``path`` names (``my_models.TwoLayer``)."""
    if not isinstance(path, str) or "." not in path:
        raise ConfigError(f"{key} must be a dotted path like 'my_package.module.Name', got {path!r}")
    module_name, _, attribute = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{key}={path}: cannot import it ({e}); a module of your own must be "
                          "importable from the folder you run trainer-run in") from None


def instantiate(group: str, section: dict, standard: dict | None = None, runner=()):
    """``section["_target_"](...)`` as the module docstring says; ``runner``: keys of the
    section the runner reads itself (never passed)."""
    factory, kwargs, fixed = arguments(group, section, standard, runner)
    return call(group, factory, kwargs, **fixed)


def arguments(group: str, section: dict, standard: dict | None = None, runner=()):
    """The callable ``section`` names, its keyword arguments from the section, and the
    standard arguments it takes (see :func:`instantiate`)."""
    factory = locate(section.get("_target_"), f"{group}._target_")
    names = accepted(factory)
    shared = shared_section(group)
    for key in (k for k in section if k not in names and k not in shared):
        close = difflib.get_close_matches(key, list(shared), n=1)
        if close:
            raise ConfigError(f"{group}.{key} is not a config key; did you mean {group}.{close[0]}?")
    kwargs = {k: v for k, v in section.items()
              if k != "_target_" and k not in runner and (k not in shared or k in names)}
    fixed = {k: v for k, v in (standard or {}).items() if k in names}
    return factory, kwargs, fixed


def accepted(klass) -> list[str]:
    """Keyword arguments ``klass(...)`` accepts, following ``**kwargs`` up the MRO (for a
    function: its named parameters)."""
    if not isinstance(klass, type):
        params = inspect.signature(klass).parameters.values()
        return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    names: list[str] = []
    for cls in klass.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names += [p.name for p in params
                  if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                  and p.name not in names]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def check_arguments(section: str, klass, kwargs: dict, exclude=()) -> None:
    """Raises ConfigError naming ``section.key`` for keys ``klass`` does not accept."""
    names = accepted(klass)
    allowed = [n for n in names if n not in exclude]
    unknown = [k for k in kwargs if k not in allowed]
    signature = f"{klass.__name__}({', '.join(names)})"
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]} is not an argument of {signature}; the config "
                          f"may set {', '.join(allowed) or 'none of them'}")
    missing = [k for k in _required(klass) if k not in kwargs and k not in exclude]
    if missing:
        raise ConfigError(f"{section}.{missing[0]} is missing: {signature} needs it; add "
                          f"+{section}.{missing[0]}=<value>")


def _required(factory) -> list[str]:
    """Arguments of ``factory`` without a default."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: nothing to tell
        return []
    return [p.name for p in params if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def call(section: str, klass, kwargs: dict, owners: dict | None = None, **fixed):
    """``klass(**kwargs, **fixed)`` after checking the keys (:func:`check_arguments`);
    ``owners``: see :func:`prefixed`."""
    check_arguments(section, klass, kwargs, exclude=fixed)
    try:
        return klass(**kwargs, **fixed)
    except ConfigError as e:
        raise ConfigError(_in_section(section, str(e), owners)) from None


def prefixed(section: str, factory, *args, **kwargs):
    """``factory(*args, **kwargs)``; a ConfigError's message (which starts with the argument
    name) is re-raised with the config section in front: ``optimizer.learning_rate ...``."""
    try:
        return factory(*args, **kwargs)
    except ConfigError as e:
        raise ConfigError(_in_section(section, str(e))) from None


def _in_section(section: str, message: str, owners: dict | None = None) -> str:
    """``message`` (it starts with an argument's name) under the section that argument came
    from: ``owners[name]`` for an argument taken from another section, else ``section``. A
    message about the section's choice itself (``model=cnn needs ...``) is left as it is."""
    if message.startswith(f"{section}="):
        return message
    name = re.match(r"\w*", message).group()
    return f"{(owners or {}).get(name, section)}.{message}"
