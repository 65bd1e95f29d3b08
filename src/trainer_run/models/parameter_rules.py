"""Which parameters train, and how fast: ``model.freeze``, ``model.lr_mult`` and ``model.wd_mult``.

These keys of the model section (:data:`KEYS`, defaults in ``configs/_model.yaml``) are read by
the runner, never passed to the model's ``_target_``. :func:`apply` sets them on the built
model's parameters before the updater packs them:

- ``freeze``: a list of name patterns (one pattern may be given as a plain string). Every
  parameter a pattern matches is frozen (``requires_grad`` False, Gluon's
  ``grad_req='null'``, Lightning's ``requires_grad=False``): no gradient is computed for it,
  and the optimizer, the kvstore, clipping and the gradient checks never see it, so it gets
  no weight decay, no optimizer state and no momentum: it stays bit for bit as it was built
  or loaded (``init_from``). Persistent values (batch normalization's running statistics)
  are not parameters and still follow the data in training mode.
- ``lr_mult``, ``wd_mult``: a mapping from name pattern to a multiplier (a number >= 0) of
  the learning rate or the weight decay of every parameter it matches
  (:class:`~trainer_run.params.Parameter`'s ``lr_mult`` / ``wd_mult``, which the optimizer
  reads as MXNet's ``_get_lr`` / ``_get_wd`` do: SGD steps ``w -= lr * lr_mult * (g + wd *
  wd_mult * w)``). Where several patterns match a parameter, the last one in the mapping
  sets it, as successive ``collect_params(...).setattr`` calls do in Gluon; the config
  replaces a value the model's code set.

A pattern is matched (:func:`fnmatch.fnmatchcase`: ``*``, ``?``, ``[seq]``; case-sensitive;
``*`` also matches ``/``) against each parameter's path in ``params()`` (the names of
``model.npz`` and the model table: ``conv1/W``, ``block1_1/bn1/gamma``) and against each layer
on that path (``block1_1``, ``block1_1/bn1``): ``conv1`` matches ``conv1/W`` and ``conv1/b``,
``*/b`` every bias, ``block1_*`` the first stage of a ResNet. A pattern that matches no
parameter, a value of the wrong kind, and a freeze that leaves nothing to train are each
refused in one line.
"""

from __future__ import annotations

import fnmatch
import math

from ..errors import ConfigError, check

KEYS = ("freeze", "lr_mult", "wd_mult")
"""Keys of the model section the runner reads itself."""
SHOWN = 8
"""Parameter paths an error lists before it says how many there are."""


def apply(model, section: dict) -> None:
    """Sets ``section``'s ``freeze``, ``lr_mult`` and ``wd_mult`` (absent or null: none) on
    ``model``'s parameters; see the module docstring. Everything is checked before anything
    is set."""
    params = model.params()
    frozen = set()
    for pattern in _patterns(section.get("freeze")):
        frozen |= set(_matching(pattern, params, f"model.freeze: {pattern!r}"))
    check(not params or len(frozen) < len(params),
          f"model.freeze freezes every parameter of the model ({len(params)}), which leaves "
          f"nothing to train; name fewer in model.freeze")
    multipliers = {key: _multipliers(section.get(key), params, key) for key in ("lr_mult", "wd_mult")}
    for path in frozen:
        params[path].requires_grad = False
    for key, values in multipliers.items():
        for path, value in values.items():
            setattr(params[path], key, value)


def _patterns(value) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(p, str) and p for p in items):
        raise ConfigError(f"model.freeze must be a list of parameter name patterns such as "
                          f"[conv1, 'fc*'], got {value!r}")
    return list(items)


def _multipliers(value, params: dict, key: str) -> dict[str, float]:
    """path -> the multiplier ``model.<key>`` gives it (the last matching pattern's)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"model.{key} must be a mapping from parameter name pattern to "
                          f"multiplier, such as {{'fc*': 10}}, got {value!r}")
    out: dict[str, float] = {}
    for pattern, mult in value.items():
        where = f"model.{key}: {pattern!r}"
        number = not isinstance(mult, bool) and isinstance(mult, (int, float))
        check(number and math.isfinite(mult) and mult >= 0,
              f"{where} must map to a number >= 0, got {mult!r}")
        for path in _matching(str(pattern), params, where):
            out[path] = float(mult)
    return out


def _matching(pattern: str, params: dict, where: str) -> list[str]:
    """The paths of ``params`` that ``pattern`` matches, itself or one of its layers."""
    found = [path for path in params if any(fnmatch.fnmatchcase(name, pattern)
                                            for name in _names(path))]
    if not found:
        paths = list(params)
        shown = ", ".join(paths[:SHOWN]) + (f", ... ({len(paths)} in all)"
                                             if len(paths) > SHOWN else "")
        raise ConfigError(f"{where} matches no parameter; the model's parameters are {shown} "
                          f"(a pattern matches a path or a layer on it, fnmatch-style)")
    return found


def _names(path: str) -> list[str]:
    """``a/b/c`` and the layers on it: ``a``, ``a/b``, ``a/b/c``."""
    parts = path.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
