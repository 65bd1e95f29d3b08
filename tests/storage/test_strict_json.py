"""Strict JSON (storage/strict_json.py): null for every non-finite float."""

from __future__ import annotations

import math

import numpy as np
from refused_writes import strict_loads as _strict

from trainer_run.storage import strict_json


def test_strict_json_writes_null_for_every_non_finite_float():
    row = {"a": math.nan, "b": [math.inf, {"c": -math.inf, "d": (np.float32("nan"), 2)}],
           "e": np.float32(2.5), "f": np.float64("-inf"), "g": np.int64(7), "h": True, "i": "NaN",
           "j": None, "k": 1e308}
    text = strict_json.dumps(row)
    assert _strict(text) == {"a": None, "b": [None, {"c": None, "d": [None, 2]}], "e": 2.5, "f": None,
                             "g": 7, "h": True, "i": "NaN", "j": None, "k": 1e308}
    assert strict_json.dumps({"x": 1}, indent=2) == '{\n  "x": 1\n}'
