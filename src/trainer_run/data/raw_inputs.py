"""What a run's raw inputs were, and whether an array can be raw inputs of that run.

A run records the inputs ``x`` of its training data as read, before any normalization
(:func:`describe`, in ``data.json`` under ``inputs``): their ``dtype``, their smallest and
largest value (``min``, ``max``) and whether every value is a whole number (``whole``:
integers, or floats such as pixel values 0.0 to 255.0). Prediction takes raw inputs and
normalizes them as the run did, so inputs scaled by the user already (``x / 255`` for a run on
uint8 pixels) would be scaled twice; :func:`implausible` tells such inputs: fractions where the
run's inputs were whole numbers, or values far outside the run's range (beyond it by more than
its own width). A record that is missing or malformed (a run of an earlier version, a damaged
file) describes nothing, and nothing is checked.
"""

from __future__ import annotations

import math
import numbers

import numpy

from . import input_checks

NUMERIC = input_checks.NUMBERS
"""The dtype kinds of numbers a model takes: booleans, integers, floats."""
KINDS = {"U": "strings", "S": "byte strings", "O": "Python objects", "c": "complex numbers",
         "M": "dates", "m": "time spans", "V": "raw records"}
"""How a message names an array of a kind that is not :data:`NUMERIC`."""


def describe(x) -> dict:
    """The record of the raw inputs ``x`` (an array of examples, possibly memory-mapped, read
    chunk by chunk): ``dtype``, ``min``, ``max`` and ``whole``; ``{}`` for no examples or an
    array that does not hold numbers."""
    kind = x.dtype.kind
    if kind not in NUMERIC or len(x) == 0:
        return {}
    low, high, fractions = math.inf, -math.inf, False
    for _, chunk in input_checks.chunks(x):
        low, high = min(low, float(chunk.min())), max(high, float(chunk.max()))
        if kind == "f" and not fractions:
            fractions = _has_fractions(chunk)
    return {"dtype": str(x.dtype), "min": low, "max": high, "whole": not fractions}


def _has_fractions(x: numpy.ndarray) -> bool:
    return not bool(numpy.all(x == numpy.floor(x)))


def recorded(record: dict) -> dict:
    """The description of the raw inputs in a run's ``data.json`` (``record``), or ``{}`` when
    it has none or one that is malformed."""
    raw = record.get("inputs") if isinstance(record, dict) else None
    if not isinstance(raw, dict):
        return {}
    bounds = [raw.get("min"), raw.get("max")]
    if not all(isinstance(b, numbers.Real) and not isinstance(b, bool) and math.isfinite(b)
               for b in bounds) or not isinstance(raw.get("whole"), bool):
        return {}
    try:
        kind = numpy.dtype(raw.get("dtype")).kind
    except TypeError:
        return {}
    return raw if kind in NUMERIC and bounds[0] <= bounds[1] else {}


def kind_of(x: numpy.ndarray) -> str:
    """What ``x`` holds, for a message: ``strings``, ``complex numbers``, ..."""
    return KINDS.get(x.dtype.kind, f"values of type {x.dtype}")


def are_floats(raw: dict) -> bool:
    """Whether the run's raw inputs (:func:`recorded`) were floats."""
    return bool(raw) and numpy.dtype(raw["dtype"]).kind == "f"


def implausible(x: numpy.ndarray, raw: dict) -> str | None:
    """Why the numbers ``x`` cannot be raw inputs of the run whose raw inputs ``raw``
    describes (see the module docstring), as the end of a sentence; None when they can."""
    values = x[numpy.isfinite(x)] if x.dtype.kind == "f" else x
    if not raw or values.size == 0:
        return None
    low, high = float(values.min()), float(values.max())
    held = f"x holds values in [{low:.4g}, {high:.4g}]"
    was = f"the run's raw inputs were {raw['dtype']} in [{raw['min']:.4g}, {raw['max']:.4g}]"
    if raw["whole"] and x.dtype.kind == "f" and _has_fractions(values):
        return f"{held} with fractions; {was}, whole numbers"
    span = raw["max"] - raw["min"]
    if low < raw["min"] - span or high > raw["max"] + span:
        return f"{held}, far outside the range of the run's raw inputs; {was}"
    return None
