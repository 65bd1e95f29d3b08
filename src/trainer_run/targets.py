"""From a config section to an object: the one way trainer-run calls what a config names.

A section names the callable that builds its object with ``_target_`` (a dotted path, Hydra's
``instantiate`` convention). A user's own module imports from the current folder, the same way
for every command and for ``load_model``: :func:`locate` looks there for the module a target
names only when it is not importable otherwise, and only while it imports it
(:func:`from_here`); nothing else is ever looked up in that folder. Every group that
builds something goes through here: model, dataset, optimizer, scheduler, updater, loss
scaling, backend, kvstore, each logger and each callback. :func:`instantiate` calls the
target with

- the section's own keys: every one must be an argument of the callable, else one line
  names the key and the callable's signature;
- the keys the group shares (``configs/_<group>.yaml``, passed as ``shared``) that the
  callable takes;
- the standard arguments the runner supplies (``in_size``, ``backend``, ``rng``,
  ``lr_scheduler``, ``run``, ...), each only when the callable takes it.

With ``_partial_: true`` (Hydra's convention) the target is not called: the object is the
target with those arguments bound (:func:`functools.partial`), e.g. a plain function that a
callback runs with the trainer.

Where the caller knows the kind of object (a :class:`Kind`), the target is checked before it
is called: something that is not callable, or a class that is not of that kind, is a
:class:`~trainer_run.errors.ConfigError` naming the key, and nothing is called. What comes
back is checked again. Whether a config read from a run directory may name a target at all is
:mod:`trainer_run.runs.trust`'s decision, made before anything here imports it.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Callable

from .errors import ConfigError
from .user_code import blame

TARGET = "_target_"
PARTIAL = "_partial_"


@dataclass(frozen=True)
class Kind:
    """What a group's ``_target_`` must build: ``description`` for the error line, ``base`` a
    class the built object (and a class target) must be an instance (a subclass) of, and
    ``fits`` a test of a class target and of the built object for duck-typed kinds."""

    description: str
    base: type | None = None
    fits: Callable[[object], bool] | None = None

    def admits(self, target) -> bool:
        """Whether the callable ``target`` may build this kind (a function always may: what
        it returns is checked by :meth:`built`)."""
        if not isinstance(target, type):
            return True
        if self.base is not None and not issubclass(target, self.base):
            return False
        return self.fits is None or self.fits(target)

    def built(self, obj) -> bool:
        """Whether ``obj`` is an object of this kind."""
        if self.base is not None and not isinstance(obj, self.base):
            return False
        return self.fits is None or self.fits(obj)


@contextlib.contextmanager
def from_here():
    """The current folder importable while the block runs: put last on ``sys.path`` (so an
    installed or standard module of the same name still wins), and taken off again after. A
    folder Python put there itself (``python -m``, ``python -c``: the folder, or ``""``) stays
    as it is. Nothing but :func:`locate`'s import of a user's target module runs inside it, so
    an ``onnx.py`` or a ``matplotlib/`` in a run folder is never what a later import finds."""
    here = os.getcwd()
    if here in sys.path or "" in sys.path:
        yield
        return
    sys.path.append(here)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        if here in sys.path:
            del sys.path[len(sys.path) - 1 - sys.path[::-1].index(here)]


def instances_callable(obj) -> bool:
    """Whether ``obj`` is callable, or for a class, whether its instances are (a class that
    defines ``__call__``)."""
    if isinstance(obj, type):
        return any("__call__" in vars(k) for k in obj.__mro__[:-1])
    return callable(obj)


def dotted(path) -> bool:
    """Whether ``path`` is a string of two or more Python names joined by dots (``a.b``), the
    only form :func:`locate` imports: ``..``, ``.x``, ``x..y``, ``os.`` or ``1abc.f`` are not."""
    parts = path.split(".") if isinstance(path, str) else []
    return len(parts) > 1 and all(p.isidentifier() for p in parts)


def locate(path, key: str, kind: Kind | None = None):
    """The callable the dotted ``path`` names (``my_models.TwoLayer``); with ``kind``, one
    that can build that kind (see :class:`Kind`)."""
    if not dotted(path):
        raise ConfigError(f"{key} must be a dotted path of Python names like "
                          f"'my_package.module.Name', got {path!r}")
    module_name, _, attribute = path.rpartition(".")
    module = _imported(module_name, f"{key}={path}")
    if not hasattr(module, attribute):
        close = difflib.get_close_matches(attribute, [n for n in dir(module) if n[:1] != "_"], n=1)
        hint = f"did you mean {module_name}.{close[0]}?" if close else "check the name"
        raise ConfigError(f"{key}={path}: {module_name} has no {attribute!r}; {hint}")
    found = getattr(module, attribute)
    if not callable(found):
        raise ConfigError(f"{key}={path} is not callable (it is a {type(found).__name__}); name "
                          "a class or a function that builds the object")
    if kind is not None and not kind.admits(found):
        raise ConfigError(f"{key}={path} must build {kind.description}")
    return found


def _imported(module_name: str, named: str):
    """The module ``module_name``, imported as Python finds it, or else, when its top-level
    package is found nowhere, from the current folder (:func:`from_here`)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name.partition(".")[0]:
            _cannot_import(named, e)
    except ImportError as e:
        _cannot_import(named, e)
    with from_here():
        try:
            return importlib.import_module(module_name)
        except ImportError as e:
            _cannot_import(named, e)


def _cannot_import(named: str, e: ImportError):
    raise ConfigError(f"{named}: cannot import it ({e}); a module of your own must be importable "
                      "from the folder you run the command in") from None


def instantiate(key: str, section: dict, standard: dict | None = None, *, runner=(), shared=None,
                kind: Kind | None = None):
    """``section["_target_"](...)`` as the module docstring says; ``key`` names the section
    (``model``, ``logger.csv``); ``runner``: keys of the section the runner reads itself
    (never passed); ``shared``: the group's shared keys with their defaults."""
    section = dict(section)
    partial = section.pop(PARTIAL, False)
    factory, kwargs, fixed = arguments(key, section, standard, runner=runner, shared=shared,
                                       kind=kind)
    if partial is True:
        return functools.partial(factory, **kwargs)
    if partial is not False:
        raise ConfigError(f"{key}.{PARTIAL} must be true or false, got {partial!r}")
    return call(key, factory, kwargs, kind=kind, target=section.get(TARGET), **fixed)


def arguments(key: str, section: dict, standard: dict | None = None, *, runner=(), shared=None,
              kind: Kind | None = None):
    """The callable ``section`` names, its keyword arguments from the section, and the
    standard arguments it takes (see :func:`instantiate`)."""
    factory = locate(section.get(TARGET), f"{key}.{TARGET}", kind)
    names = accepted(factory)
    shared = shared or {}
    for name in (k for k in section if k not in names and k not in shared):
        close = difflib.get_close_matches(name, list(shared), n=1)
        if close:
            raise ConfigError(f"{key}.{name} is not a config key; did you mean {key}.{close[0]}?")
    kwargs = {k: v for k, v in section.items()
              if k != TARGET and k not in runner and (k not in shared or k in names)}
    fixed = {k: v for k, v in (standard or {}).items() if k in names}
    return factory, kwargs, fixed


def accepted(klass) -> list[str]:
    """Keyword arguments ``klass(...)`` accepts, following ``**kwargs`` up the MRO (for a
    function: its named parameters)."""
    if not isinstance(klass, type):
        params = _parameters(klass)
        return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    names: list[str] = []
    for cls in klass.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        params = _parameters(init)
        names += [p.name for p in params
                  if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                  and p.name not in names]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def _parameters(function) -> list:
    try:
        return list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: nothing to tell
        return []


def check_arguments(key: str, klass, kwargs: dict, exclude=()) -> None:
    """Raises ConfigError naming ``key.name`` for keys ``klass`` does not accept, or for a
    required argument the section leaves out."""
    names = accepted(klass)
    allowed = [n for n in names if n not in exclude]
    unknown = [k for k in kwargs if k not in allowed]
    signature = f"{getattr(klass, '__name__', klass)}({', '.join(names)})"
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]} is not an argument of {signature}; the config "
                          f"may set {', '.join(allowed) or 'none of them'}")
    missing = [p.name for p in _parameters(klass) if p.default is p.empty and p.name != "self"
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.name not in kwargs and p.name not in exclude]
    if missing:
        raise ConfigError(f"{key}.{missing[0]} is missing: {signature} needs it; add "
                          f"+{key}.{missing[0]}=<value>")


def check_call(key: str, factory, kwargs: dict, leading=(), what: str = "") -> None:
    """Refuses, in one line naming ``key``, a ``factory`` of the user's that cannot be called
    with the positional arguments named ``leading`` and ``kwargs`` (a class is built with them:
    its ``leading`` is empty); ``what`` says how the entry's callable is used."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without one: its call will tell
        return
    try:
        signature.bind(*(None for _ in leading), **kwargs)
    except TypeError as e:
        given = ", ".join([*leading, *(f"{k}=" for k in kwargs)])
        verb = "built" if isinstance(factory, type) else "called"
        raise ConfigError(f"{key}: {factory.__qualname__}{signature} cannot be {verb} with "
                          f"({given}): {e}; {what}") from None


def call(key: str, klass, kwargs: dict, kind: Kind | None = None, target=None, **fixed):
    """``klass(**kwargs, **fixed)`` after checking the keys (:func:`check_arguments`); a
    ConfigError the callable raises is re-raised under the section (:func:`prefixed`), any
    other exception of the user's code names ``key`` (:func:`trainer_run.user_code.blame`);
    with ``kind``, what it returns must be of that kind."""
    check_arguments(key, klass, kwargs, exclude=fixed)
    try:
        with blame(key, klass):
            built = klass(**kwargs, **fixed)
    except ConfigError as e:
        raise ConfigError(in_section(key, str(e))) from None
    if kind is not None and not kind.built(built):
        name = target or f"{klass.__module__}.{klass.__qualname__}"
        raise ConfigError(f"{key}.{TARGET}={name} must build {kind.description}; it built a "
                          f"{type(built).__name__}")
    return built


def prefixed(key: str, factory, *args, **kwargs):
    """``factory(*args, **kwargs)``; a ConfigError's message (which starts with the argument
    name) is re-raised with the config section in front: ``optimizer.learning_rate ...``."""
    try:
        return factory(*args, **kwargs)
    except ConfigError as e:
        raise ConfigError(in_section(key, str(e))) from None


def in_section(key: str, message: str) -> str:
    """``message`` (it starts with an argument's name) under the section ``key``. A message
    about the section's choice itself (``model=cnn needs ...``, ``model: ...``) or already
    under a section is left as it is."""
    if message.startswith((f"{key}=", f"{key}.", f"{key}:")):
        return message
    return f"{key}.{message}"
