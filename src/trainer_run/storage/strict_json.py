"""Strict JSON for the files a run writes for other programs (``metrics.jsonl``, ``summary.json``).

Python's :mod:`json` writes ``NaN``, ``Infinity`` and ``-Infinity``, which strict JSON
parsers refuse. Here every non-finite float (NumPy scalars included, at any depth) is
written as ``null``: a reader sees ``null`` where a value was NaN or infinite (a diverged
loss, for example). NumPy scalars are written as the Python numbers they hold.
"""

from __future__ import annotations

import json
import math

import numpy


def dumps(value, **kwargs) -> str:
    """``json.dumps`` of :func:`finite` ``value``; ``kwargs`` go to ``json.dumps``. A
    non-finite float that got past the conversion raises ValueError instead of being written."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)


def finite(value):
    """``value`` with every NaN or infinite float, at any depth of dicts, lists and tuples,
    replaced by None and NumPy scalars by Python ones."""
    if isinstance(value, numpy.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
