"""The Summary extension (training/extensions/summary_writer.py): a refused write names the file and keeps the
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
from trainer_run.training.extensions import LogReport, Summary


def _trainer(out: Path, status="completed"):
    updater = SimpleNamespace(iteration=5, epoch_detail=0.5, readings=dict,  # the updater protocol
                              settle=lambda: None)
    return SimpleNamespace(out=str(out), updater=updater, elapsed_time=2.0, updating_time=2.0,
                           status=status, stop_reason=status)


class _Log(LogReport):
    elapsed_s = 1.5                         # the clock's reading, as the test sets it


def _summary(*rows: dict) -> Summary:
    store = SimpleNamespace(state_dict=lambda to_numpy: {"l1/W": np.arange(3.0)})
    log = _Log(lambda trainer: False, loggers=[])
    log.log = list(rows)
    return Summary(log, 10, store)


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


def test_the_summary_holds_each_metrics_latest_record(tmp_path):
    """A log point, then an evaluation of its own, then the SWA weights' row: each metric's
    latest value, whichever row holds it."""
    trainer = _trainer(tmp_path)
    summary = _summary({"iteration": 3, "lr": 0.1, "train/loss": 0.5, "val/loss": 0.75},
                       {"iteration": 4, "val/loss": 0.625, "val/ema/loss": 0.7},
                       {"iteration": 5, "train/loss": 0.25},
                       {"iteration": 5, "val/swa/loss": 0.5})
    summary.initialize(trainer)
    summary.finalize(trainer)
    written = _strict((tmp_path / "summary.json").read_text())
    assert {k: v for k, v in written.items() if "/" in k} == {
        "train/loss": 0.25, "val/loss": 0.625, "val/ema/loss": 0.7, "val/swa/loss": 0.5}
