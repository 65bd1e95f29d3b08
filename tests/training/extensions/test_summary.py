"""The Summary extension (training/extensions/summary.py): a refused write names the file and keeps the
old one; NaN and infinity are written as null."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from refused_writes import FULL
from refused_writes import disk_full_for as _disk_full_for
from refused_writes import strict_loads as _strict
from refused_writes import temporaries as _temporaries

from trainer_run.errors import StorageError
from trainer_run.training.extensions import Summary


def _trainer(out: Path, status="completed"):
    updater = SimpleNamespace(iteration=5, epoch_detail=0.5, readings=dict,  # the updater protocol
                              settle=lambda: None)
    return SimpleNamespace(out=str(out), updater=updater, elapsed_time=2.0, updating_time=2.0,
                           status=status, stop_reason=status)


def _summary(last: dict) -> Summary:
    store = SimpleNamespace(state_dict=lambda to_numpy: {"l1/W": np.arange(3.0)})
    return Summary(SimpleNamespace(last=last, elapsed_s=1.5), 10, store)


@pytest.mark.parametrize("failing", ["summary.json", "model.npz"])
def test_a_refused_summary_write_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch, failing):
    (tmp_path / failing).write_bytes(b"old")
    trainer = _trainer(tmp_path)
    summary = _summary({"train/loss": 0.5})
    summary.initialize(trainer)
    _disk_full_for(monkeypatch, failing)
    with pytest.raises(StorageError) as caught:
        summary.finalize(trainer)
    assert str(caught.value) == f"cannot write {tmp_path / failing}: {FULL}"
    assert (tmp_path / failing).read_bytes() == b"old"
    assert _temporaries(tmp_path) == []


def test_the_summary_holds_null_for_nan_and_inf(tmp_path):
    trainer = _trainer(tmp_path, status="diverged")
    summary = _summary({"train/loss": math.nan, "val/loss": np.float32("-inf"), "val/accuracy": 0.75,
                        "lr": 0.1})
    summary.initialize(trainer)
    summary.log_report.elapsed_s = math.inf
    summary.finalize(trainer)
    assert _strict((tmp_path / "summary.json").read_text()) == {
        "iteration": 5, "epoch": 0.5, "elapsed_s": None, "samples_per_s": 0.0, "status": "diverged",
        "stop_reason": "diverged", "train/loss": None, "val/loss": None, "val/accuracy": 0.75}
