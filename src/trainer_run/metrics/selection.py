"""The config key ``metrics``: from the entries a user writes to the metrics a run computes.

An entry is one of

- a built-in's name: ``accuracy``, ``top_k`` (``k`` 5, Keras's default) or ``top_<k>``
  (``top_3``), ``f1_macro``, ``f1_micro``, ``precision``, ``recall``, ``confusion_matrix``,
  ``perplexity``, ``bits_per_token`` for classification; ``mae``, ``rmse``, ``r2`` for regression;
- a mapping ``{name: <built-in>}``, which for ``top_k`` may give ``k`` (``{name: top_k, k: 3}``);
- a mapping ``{_target_: module.name, ...}``: the user's metric. A function is called with
  ``(y_pred, y_true)`` and the entry's other keys; a class is built with the entry's other
  keys and its instance called with ``(y_pred, y_true)``. ``name`` (default: the function's
  or class's name) is how it is logged.

Anything else, a built-in of the other task, ``top_k`` with ``k`` not below the number of
classes, or two entries logged under one name is a
:class:`~trainer_run.errors.ConfigError` of one line naming the entry (``metrics[2]``).
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Callable

from .. import targets
from ..errors import ConfigError, check, check_number
from ..user_code import blame
from . import classification, regression

CLASSIFICATION = "classification"
REGRESSION = "regression"
SCALAR, PER_CLASS, MATRIX, USERS = "scalar", "per_class", "matrix", "users"
"""What a metric gives: one number, one number per class, the confusion matrix, or what a
user's metric returns (a number, or a dict of numbers by name)."""

BUILTINS: dict[str, tuple[str, str, Callable]] = {
    "accuracy": (CLASSIFICATION, SCALAR, classification.accuracy),
    "f1_macro": (CLASSIFICATION, SCALAR, functools.partial(classification.f1, average="macro")),
    "f1_micro": (CLASSIFICATION, SCALAR, functools.partial(classification.f1, average="micro")),
    "precision": (CLASSIFICATION, PER_CLASS, classification.precision),
    "recall": (CLASSIFICATION, PER_CLASS, classification.recall),
    "confusion_matrix": (CLASSIFICATION, MATRIX, classification.confusion_matrix),
    "perplexity": (CLASSIFICATION, SCALAR, classification.perplexity),
    "bits_per_token": (CLASSIFICATION, SCALAR, classification.bits_per_token),
    "mae": (REGRESSION, SCALAR, regression.mae),
    "rmse": (REGRESSION, SCALAR, regression.rmse),
    "r2": (REGRESSION, SCALAR, regression.r2),
}
"""The built-ins other than ``top_k``, by name: their task, what they give, their function."""
TOP_K = "top_k"
DEFAULT_K = 5
SHORT_TOP_K = re.compile(r"top_(\d+)")
NAMES = ("accuracy", "top_k", "top_<k>", "f1_macro", "f1_micro", "precision", "recall",
         "confusion_matrix", "perplexity", "bits_per_token", "mae", "rmse", "r2")
"""Every built-in's name as the messages list them."""
USERS_KIND = targets.Kind("a metric: a function of (y_pred, y_true) returning a float or a dict "
                          "of floats, or a class whose instances are one",
                          fits=targets.instances_callable)


@dataclass(frozen=True)
class Metric:
    """One entry of ``metrics``: its config ``key`` (``metrics[2]``), the ``name`` it is
    logged as (``f1_macro``, ``top_5_accuracy``), what it gives (``kind``), and ``compute``,
    called with the split's ``(y_pred, y_true)``."""

    key: str
    name: str
    kind: str
    compute: Callable


def chosen(entries, task: str, classes: int | None) -> list[Metric]:
    """The metrics of the config's ``metrics`` list ``entries`` for a run of ``task`` whose
    model has ``classes`` outputs (classification), checked as the module docstring says."""
    check(isinstance(entries, (list, tuple)), f"metrics must be a list of metrics (e.g. "
          f"metrics=[f1_macro,top_5]), got {entries!r}")
    found: list[Metric] = []
    for index, entry in enumerate(entries):
        metric = _entry(f"metrics[{index}]", entry, task, classes)
        same = next((m for m in found if m.name == metric.name), None)
        check(same is None, f"{same.key if same else ''} and {metric.key} are both logged as "
              f"{metric.name}; give one of them another name ({{..., name: other}})")
        found.append(metric)
    return found


def _entry(key: str, entry, task: str, classes: int | None) -> Metric:
    if isinstance(entry, dict) and targets.TARGET in entry:
        return _users(key, entry)
    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
        options = {k: v for k, v in entry.items() if k != "name"}
        return _builtin(key, entry["name"], options, task, classes)
    if isinstance(entry, str):
        return _builtin(key, entry, {}, task, classes)
    raise ConfigError(f"{key} must be a metric's name (f1_macro), {{name: top_k, k: 3}} or "
                      f"{{_target_: module.function}}, got {entry!r}")


def _builtin(key: str, name: str, options: dict, task: str, classes: int | None) -> Metric:
    short = SHORT_TOP_K.fullmatch(name)
    if name == TOP_K or short:
        return _top_k(key, options, int(short.group(1)) if short else DEFAULT_K, task, classes)
    if name not in BUILTINS:
        known = [n for n in NAMES if "<" not in n]
        close = [n for n in known if n.startswith(name)] or \
            difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ConfigError(f"{key}={name} is not a metric; {hint}choose one of {', '.join(NAMES)}, "
                          f"or {{_target_: module.function}} for one of yours")
    check(not options, f"{key}: {name} takes no options, got {', '.join(map(str, options))}")
    metric_task, kind, compute = BUILTINS[name]
    _check_task(key, name, metric_task, task)
    return Metric(key, name, kind, compute)


def _top_k(key: str, options: dict, k, task: str, classes: int | None) -> Metric:
    extra = [str(o) for o in options if o != "k"]
    check(not extra, f"{key}: top_k takes k alone, got {', '.join(extra)}")
    k = check_number(f"{key}.k", options.get("k", k), low=1, integer=True)
    _check_task(key, TOP_K, CLASSIFICATION, task)
    check(classes is None or k < classes, f"{key}: top_k with k={k} counts every example as a hit "
          f"with {classes} classes; choose k below {classes}")
    return Metric(key, f"top_{k}_accuracy", SCALAR,
                  functools.partial(classification.top_k_accuracy, k=k))


def _check_task(key: str, name: str, metric_task: str, task: str) -> None:
    if metric_task != task:
        fitting = [n for n in NAMES if n in BUILTINS and BUILTINS[n][0] == task] + \
                  (["top_k"] if task == CLASSIFICATION else [])
        raise ConfigError(f"{key}={name} is a {metric_task} metric and this run's task is {task} "
                          f"(dataset.task); choose among {', '.join(sorted(fitting))}")


def _users(key: str, entry: dict) -> Metric:
    section = {k: v for k, v in entry.items() if k != "name"}
    factory, kwargs, _ = targets.arguments(key, section, kind=USERS_KIND)
    name = entry.get("name", getattr(factory, "__name__", None))
    check(isinstance(name, str) and name.strip() != "",
          f"{key}.name must be a non-empty string (how the metric is logged), got {name!r}")
    _check_call(key, factory, kwargs)
    if isinstance(factory, type):
        with blame(key, factory):
            return Metric(key, name, USERS, factory(**kwargs))
    return Metric(key, name, USERS, functools.partial(factory, **kwargs) if kwargs else factory)


def _check_call(key: str, factory, kwargs: dict) -> None:
    """Refuses a class that cannot be built with ``kwargs``, or a function that cannot be
    called with ``(y_pred, y_true)`` and ``kwargs``, in one line naming the entry."""
    if isinstance(factory, type):
        targets.check_call(key, factory, kwargs, what="its instance is called with (y_pred, "
                           "y_true), and the class is built with the entry's other keys")
    else:
        targets.check_call(key, factory, kwargs, ("y_pred", "y_true"), "a metric takes the "
                           "predictions and the labels, then the entry's other keys")


LOGGED_TOP_K = re.compile(r"top_(\d+)_accuracy")


def _logged(entry) -> str | None:
    """The name the ``metrics`` entry ``entry`` is logged under, as written (None for an entry
    :func:`chosen` will refuse): a user's entry without ``name`` by its target's last name."""
    if isinstance(entry, dict) and isinstance(entry.get(targets.TARGET), str):
        return entry.get("name", entry[targets.TARGET].rpartition(".")[2])
    name = entry.get("name") if isinstance(entry, dict) else entry
    if not isinstance(name, str):
        return None
    short = SHORT_TOP_K.fullmatch(name)
    if name == TOP_K or short:
        k = entry.get("k", DEFAULT_K) if isinstance(entry, dict) else DEFAULT_K
        return f"top_{short.group(1) if short else k}_accuracy"
    return name


def _measuring(name: str) -> str | None:
    """The built-in ``metrics`` entry that logs ``name`` (``f1_macro``, ``top_5_accuracy``:
    ``top_5``); None for a name no built-in metric logs, or for ``accuracy``, which every
    built-in classifier reports itself."""
    top_k = LOGGED_TOP_K.fullmatch(name)
    if top_k:
        return f"top_{top_k.group(1)}"
    return name if name in BUILTINS and name != "accuracy" and BUILTINS[name][1] != MATRIX else None


def check_objective(metric, entries) -> None:
    """Refuses, before anything is built, an ``objective.metric`` (``val/f1_macro``,
    ``val/ema/precision/3``) that names a built-in metric the ``metrics`` list ``entries``
    does not measure, so that no run trains to its first evaluation to find it missing."""
    parts = metric.split("/") if isinstance(metric, str) else []
    if parts[:1] != ["val"]:
        return
    rest = parts[2:] if parts[1:2] == ["ema"] else parts[1:]
    entries = entries if isinstance(entries, (list, tuple)) else []
    needed = _measuring(rest[0]) if rest else None
    if needed is None or rest[0] in {_logged(entry) for entry in entries}:
        return
    written = [e for e in entries if isinstance(e, str)]
    fix = (f"metrics=[{','.join([*written, needed])}]" if len(written) == len(entries)
           else f"{needed} to metrics")
    raise ConfigError(f"objective.metric={metric} is not measured: the run's metrics do not "
                      f"include {needed}; add {fix}")
