"""What ``plot.png`` shows, decided from the rows and the config alone (nothing is drawn
here; :mod:`.plot` draws it).

- :func:`panels`: one panel per metric name (``loss`` first) with its ``train/`` and ``val/``
  curves, those of the averaged weights (``val/ema/<name>``, ``val/swa/<name>``) and the test
  split's value (``test/<name>``) when the run has one (marked where :func:`test_point` says);
  a family of values (a per-class metric's ``val/recall/<class>``, a user's metric's dict) in
  one panel named for it; one per other
  logged value (``loss_scale``, ...), and the learning rate at the bottom only when it
  varies (:func:`varies`): a constant rate is in the title instead.
- :func:`axis`: each panel's y scale and limits. A loss panel is on a log axis when its
  values after the first tenth of training span more than a decade (a loss falls by
  factors: on a log axis its plateau, its descent and the last gap between training and
  validation all show, where a linear axis squeezes everything after the first drop against
  zero); a value far outside the range of the later values in the first tenth of training
  (the first spikes) is left above or below the limits (:func:`y_axis`). Any other metric
  (accuracy) is scaled to the second half of training, where a run ends up, so that 98%
  and 99% lie apart (the rise before it is in the loss panel). The learning rate and loss
  scale are on a log axis when they span more than a decade.
- :func:`title`: the run (the last two parts of its directory) and its main choices, with the
  rate it starts from (:func:`starting_rate`: the schedule's when there is one).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

from ... import averaging
from .base import NOT_METRICS

NOT_DRAWN = (*NOT_METRICS, "epoch", "elapsed_s")
LOG_SCALED = ("lr", "loss_scale")
"""Panels drawn on a log scale when their values span more than a decade."""
SPLITS = ("train/", "val/", "test/")
AVERAGED = tuple(f"{kind}/" for kind in (averaging.EMA, averaging.SWA))
"""What follows a split in the keys of the averaged weights' metrics (``val/ema/loss``)."""
EARLY_LOSS = 0.1
"""The part of training (of its iterations) whose loss values may be spikes left outside."""
EARLY_METRIC = 0.5
"""The part of training left out of another metric's limits unless close to the rest."""
SPIKE = 0.5
"""An early value further than this many times the later values' range beyond them is left
out of the limits."""
MARGIN = 0.05
"""Room above and below the values, as a fraction of their range."""
MIN_POINTS = 4
"""With fewer values in a panel, matplotlib's own limits are used."""


@dataclass(frozen=True)
class Panel:
    """One panel: its ``name`` (the metric's, or the logged value's), the row keys drawn as
    curves, whether it is a ``metric`` (``train/``, ``val/`` keys), and the test split's
    values to mark (``{"test/<name>": value}``)."""

    name: str
    keys: list[str]
    metric: bool = False
    tested: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Axis:
    """A panel's y ``scale`` (``linear`` or ``log``) and limits (None: matplotlib's own)."""

    scale: str = "linear"
    low: float | None = None
    high: float | None = None


def panels(rows: list[dict], tested: dict | None = None) -> list[Panel]:
    """The panels of ``rows``: the metric names (loss first, then by name), the other logged
    values, then the learning rate when it :func:`varies`; each metric panel carries the
    ``tested`` values of its name (a ``test/`` metric without a panel is not drawn)."""
    tested = tested or {}
    keys = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in NOT_DRAWN]
    names: dict[str, list[str]] = {}
    for key in keys:
        names.setdefault(panel_name(key), []).append(key)
    if "lr" in names and not varies(points(rows, "lr")[1]):
        del names["lr"]
    order = sorted(names, key=lambda n: (n == "lr", n != "loss", "/" not in names[n][0], n))
    return [Panel(name, sorted(names[name], key=_curve_order),
                  metric=names[name][0].startswith(SPLITS),
                  tested={k: v for k, v in tested.items() if k == f"test/{name}" and _finite(v)})
            for name in order]


def panel_name(key: str) -> str:
    """The panel of a row's ``key``: the metric's name after its split and any averaged
    weights' part, the first part of a family's (``val/ema/recall/cat`` -> ``recall``); a
    value that is no split's (``lr``) is its own."""
    if not key.startswith(SPLITS):
        return key
    name = key.partition("/")[2]
    if name.startswith(AVERAGED):
        name = name.partition("/")[2]
    return name.partition("/")[0]


def _curve_order(key: str) -> tuple:
    """Training first, then the evaluations, those of averaged weights last."""
    return not key.startswith("train/"), key.partition("/")[2].startswith(AVERAGED)


def test_point(weights: dict, last: int) -> tuple[int, str]:
    """Where the test values are marked and what their legend adds: at the iteration of the
    weights the test measured (``weights``, the held-out evaluator's ``{"checkpoint": "best"
    | "last", "iteration": N}``), ``(best weights)`` when they are the best evaluation's
    (``(best EMA weights)`` when they are the EMA's: ``"averaged": "ema"``);
    without a record, at the ``last`` iteration with nothing added."""
    iteration = weights.get("iteration")
    where = iteration if isinstance(iteration, int) else last
    if weights.get("checkpoint") != "best":
        return where, ""
    averaged = weights.get("averaged")
    return where, f" (best {averaged.upper()} weights)" if averaged else " (best weights)"


def points(rows: list[dict], key: str) -> tuple[list, list]:
    """The iterations and finite values of ``key`` in the rows that have one."""
    pairs = [(row["iteration"], float(row[key])) for row in rows if _finite(row.get(key))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def varies(values: list[float]) -> bool:
    """Whether the values are not all the same (none: they do not)."""
    return bool(values) and max(values) != min(values)


def axis(panel: Panel, rows: list[dict]) -> Axis:
    """The y axis of ``panel`` over ``rows`` (see the module's text): a loss by
    :func:`y_axis` with the first tenth of training as possible spikes and a log scale
    allowed, another metric by :func:`y_axis` from the second half (the test values count as
    values of the last iteration, so they are always inside), the learning rate and loss
    scale on a log scale when they span more than a decade, anything else as matplotlib
    scales it."""
    pairs = [(x, y) for key in panel.keys for x, y in zip(*points(rows, key))]
    if panel.tested and pairs:
        last = max(x for x, _ in pairs)
        pairs += [(last, float(value)) for value in panel.tested.values()]
    if panel.metric:
        loss = "loss" in panel.name
        return y_axis(pairs, EARLY_LOSS if loss else EARLY_METRIC, log=loss)
    values = [y for _, y in pairs if y > 0]
    if panel.name in LOG_SCALED and values and max(values) > 10 * min(values):
        return Axis("log")
    return Axis()


def y_axis(pairs: list[tuple[float, float]], early: float, log: bool = False) -> Axis:
    """The scale and limits for the (iteration, value) ``pairs`` of one panel. The values
    after the first ``early`` part of the iterations set the range; an earlier value counts
    too when it lies within :data:`SPIKE` times that range of it (a first spike far beyond
    is left outside the limits). With ``log``, the scale is logarithmic when every value is
    positive and the later ones span more than a decade, and the range is taken in decades.
    :data:`MARGIN` of the range is added on each side. Fewer than :data:`MIN_POINTS` finite
    values, or later values all equal, leave the limits to matplotlib."""
    finite = [(x, y) for x, y in pairs if math.isfinite(y)]
    if len(finite) < MIN_POINTS:
        return Axis()
    first, last = min(x for x, _ in finite), max(x for x, _ in finite)
    cut = first + early * (last - first)
    later = [y for x, y in finite if x > cut]
    if len(later) < 2:
        later = [y for _, y in finite]
    logarithmic = log and min(y for _, y in finite) > 0 and max(later) > 10 * min(later)
    scale = math.log10 if logarithmic else float
    low, high = min(map(scale, later)), max(map(scale, later))
    reach = SPIKE * (high - low)
    if reach <= 0:
        return Axis("log" if logarithmic else "linear")
    kept = [scale(y) for x, y in finite if x <= cut and low - reach <= scale(y) <= high + reach]
    low, high = min([low, *kept]), max([high, *kept])
    pad = MARGIN * (high - low)
    low, high = low - pad, high + pad
    if logarithmic:
        return Axis("log", 10 ** low, 10 ** high)
    return Axis("linear", low, high)


def title(out: Path, config: dict) -> str:
    """The figure's title: the run (its directory's last two parts, e.g. ``2026-11-21/10-53-00``
    or ``<sweep>/3``) on the first line; its model, data, optimizer with the learning rate the
    run starts from (:func:`starting_rate`), the schedule when it is not constant and the seed
    on the second (each left out when the config does not say it)."""
    run = "/".join(Path(out).parts[-2:])
    model, data = _name(config.get("model")), _data(config.get("dataset"))
    words = [" on ".join(w for w in (model, data) if w)]
    optimizer = config.get("optimizer") or {}
    rate = starting_rate(config)
    words.append(" ".join(w for w in (_name(optimizer),
                                      f"lr={rate:g}" if _finite(rate) else "") if w))
    schedule = _name(config.get("scheduler")).removesuffix("Scheduler")
    if schedule and schedule != "Constant":
        words.append(f"{schedule.lower()} schedule")
    if isinstance(config.get("seed"), int):
        words.append(f"seed {config['seed']}")
    choices = ", ".join(w for w in words if w)
    return f"{run}\n{choices}" if choices else run


def starting_rate(config: dict):
    """The learning rate the run starts from, as the config says it: the schedule's ``base_lr``
    when there is a schedule (it owns the rate; the optimizer is built without one), else
    ``optimizer.learning_rate``; None when the section that owns it does not say it."""
    scheduler, optimizer = config.get("scheduler"), config.get("optimizer")
    if isinstance(scheduler, dict):
        return scheduler.get("base_lr")
    return optimizer.get("learning_rate") if isinstance(optimizer, dict) else None


def _name(section) -> str:
    """The last dotted part of a config section's ``_target_`` ('' without one)."""
    target = section.get("_target_") if isinstance(section, dict) else None
    return target.rsplit(".", 1)[-1] if isinstance(target, str) else ""


def _data(section) -> str:
    """The dataset: the name of the file it reads, else its loader's name."""
    if isinstance(section, dict):
        for key in ("path", "x_path", "train_images"):
            if isinstance(section.get(key), str):
                return Path(section[key]).name
    return _name(section)


def _finite(value) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))
