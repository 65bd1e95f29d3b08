"""Checking a config section against the constructor it feeds."""

from __future__ import annotations

import inspect

from trainer_run.errors import ConfigError


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
    allowed = [n for n in accepted(klass) if n not in exclude]
    unknown = [k for k in kwargs if k not in allowed]
    if unknown:
        raise ConfigError(
            f"{section}.{unknown[0]} is not an argument of {klass.__name__}; "
            f"it accepts: {', '.join(allowed)}"
        )


def call(section: str, klass, kwargs: dict, **fixed):
    """``klass(**kwargs, **fixed)`` after checking the keys; TypeErrors become ConfigErrors."""
    check_arguments(section, klass, kwargs, exclude=fixed)
    return prefixed(section, klass, **kwargs, **fixed)


def prefixed(section: str, factory, *args, **kwargs):
    """``factory(*args, **kwargs)``; a ConfigError's message (which starts with the argument
    name) is re-raised with the config section in front: ``optimizer.learning_rate ...``."""
    try:
        return factory(*args, **kwargs)
    except ConfigError as e:
        raise ConfigError(f"{section}.{e}") from None
