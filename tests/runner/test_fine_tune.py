"""runner/fine_tune.py: ``init_from=<run>`` takes the source run's model section as data, its
escaped interpolations kept as the text they are (``literal``; the runs that show it through
``trainer-run``, ``debug=lr_find`` and ``trainer_run.train``: tests/command/test_init_from.py)."""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

from trainer_run.runner.fine_tune import literal


@pytest.mark.parametrize("text", ["${oc.env:X}", "\\${x}", "\\\\${x}", "a\\b ${y} $ {z} ${", "plain",
                                  "}${${a}}", "\\"])
def test_literal_resolves_back_to_the_same_text(text, monkeypatch):
    monkeypatch.setitem(os.environ, "X", "read")
    held = literal({"a": text, "b": [text, {"c": text}], "d": 3})
    back = OmegaConf.to_container(OmegaConf.create(held), resolve=True)
    assert back == {"a": text, "b": [text, {"c": text}], "d": 3}
