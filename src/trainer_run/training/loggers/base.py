"""The base of the loggers: sinks of the rows :class:`~..extensions.LogReport` computes."""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path

NOT_METRICS = ("iteration", "time")
"""Row keys that are no metric: the step and the wall-clock time."""
HIDDEN = ("hydra", "resume")
"""Config sections that are no hyper-parameter of the run."""
INTERNAL = ("dataset.md5.", "updater.callbacks.")
"""Keys that check or hook the run rather than set it: the built-in sets' checksums (always
checked, never chosen), and the per-stage hooks, left out where null (a stage without a hook)."""
RESOLVER = re.compile(r"\$\{\s*[\w.]+\s*:")
"""A resolver call in a value as written (``${oc.env:TOKEN}``, any ``${name:...}``)."""
REFERENCE = re.compile(r"\$\{\s*(\.*)([\w.\[\]]+)\s*\}")
"""A reference to another key (``${optimizer.learning_rate}``, ``${.b}``): its leading dots
and its path."""


@dataclass
class RunInfo:
    """What a logger may know of the run besides its rows: the resolved ``config``, the
    :class:`~..extensions.Objective` (its ``metric`` and ``best``) and the
    :class:`~..extensions.HeldOutEvaluator` (its ``metrics``, the test split's
    ``test/<metric>``, and ``weights``, which weights they measured, once training completed:
    it finalizes before the loggers close; set on rank 0 when the evaluator is built), when
    there are."""

    config: dict = field(default_factory=dict)
    objective: object = None
    held_out: object = None
    written: dict | None = None
    """The config as written, its interpolations unresolved (None: as ``config``)."""

    def hyperparameters(self) -> dict:
        """The run's hyper-parameters: every scalar of ``config`` under its dotted key (see
        :func:`flat`), the sections that are none (:data:`HIDDEN`) and the internal keys
        (:data:`INTERNAL`: every ``dataset.md5`` key, a null ``updater.callbacks`` one) left
        out. A value that is written with a resolver (``${oc.env:TOKEN}``), or refers to a key
        that is, is the text as written: its resolved value (a secret from the environment)
        is never logged."""
        values = {k: v for k, v in flat(self.config).items()
                  if k.split(".")[0] not in HIDDEN and not internal(k, v)}
        if self.written is None:
            return values
        written, logged = flat(self.written), {}
        for key, value in values.items():
            source = next((w for w in _owners(key) if w in written), None)
            if source is None or not _calls_resolver(source, written, set()):
                logged[key] = value
            elif not internal(source, written[source]):
                logged[source] = written[source]
        return logged


class Logger:
    """Receives every row of the log. :meth:`start` gets the run directory and all the rows
    logged so far (a resumed run's rows come from its checkpoint), from which it writes its
    files anew, so a resume neither repeats nor loses a row; :meth:`write` gets each new
    row; :meth:`close` runs when training ends, however it ends, and :meth:`finish` once the
    run's summary is written (a logger that sends the run's files elsewhere sends them then).
    Rows are plain mappings whose values may be NaN or infinite (the state keeps them)."""

    def __init__(self, run: RunInfo | None = None):
        self.run = run or RunInfo()

    def start(self, out: Path, rows: list[dict]) -> None:
        """Rewrites this logger's files in ``out`` from ``rows``."""

    def write(self, row: dict) -> None:
        """Adds one new row."""

    def close(self) -> None:
        """Training ended."""

    def finish(self, status: str) -> None:
        """The run's files are final: ``summary.json`` is written, and ``status`` is how the run
        ended, as it says (``completed``, ``interrupted``, ``diverged`` or ``failed``). Called
        after :meth:`close`, once the summary is written, even when the run failed."""


def flat(config: dict, prefix: str = "") -> dict:
    """The scalars of ``config`` by dotted key; a list as its text, null as ``"null"``."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, f"{name}."))
        elif isinstance(value, (bool, str)) or is_number(value):
            out[name] = value
        else:
            out[name] = "null" if value is None else str(value)
    return out


def internal(key: str, value) -> bool:
    """Whether ``key`` is one of the :data:`INTERNAL` keys that are no hyper-parameter."""
    return key.startswith(INTERNAL[0]) or key.startswith(INTERNAL[1]) and value in (None, "null")


def _owners(key: str) -> list[str]:
    """``key`` and the sections above it (``a.b.c``: ``a.b.c``, ``a.b``, ``a``), where a value
    written as an interpolation may have made it."""
    parts = key.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _calls_resolver(key: str, written: dict, seen: set) -> bool:
    """Whether ``written[key]`` calls a resolver, itself or through the keys it refers to."""
    if key in seen:
        return False
    seen.add(key)
    text = str(written.get(key, ""))
    if RESOLVER.search(text):
        return True
    for dots, path in REFERENCE.findall(text):
        if dots:  # relative: from the section holding key, one level up per extra dot
            parent = key.split(".")[:-len(dots)]
            path = ".".join([*parent, path])
        path = path.replace("[", ".").replace("]", "")
        if any(_calls_resolver(k, written, seen) for k in written
               if k == path or k.startswith(f"{path}.") or path.startswith(f"{k}.")):
            return True
    return False


def is_number(value) -> bool:
    """Whether ``value`` is a real number (a bool is not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
