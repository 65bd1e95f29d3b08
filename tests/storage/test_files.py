"""The files a run writes besides checkpoint data: replaced atomically, a refused write named
in one StorageError with no temporary file left, and strict JSON (NaN and inf as null)."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trainer_run.errors import StorageError
from trainer_run.storage import checkpoint, files
from trainer_run.training.extensions import LogReport, Summary

FULL = "No space left on device"


def _disk_full_for(monkeypatch, name: str) -> None:
    """Makes the disk refuse (ENOSPC at fsync) every file whose name contains ``name``."""
    real = os.fsync

    def fsync(fd):
        if name in os.path.basename(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.ENOSPC, FULL)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _strict(text: str):
    """Parses ``text`` as strict JSON: NaN, Infinity and -Infinity are refused."""
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def _temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in Path(directory).rglob("*") if ".tmp" in p.name)


# -- atomic writing -----------------------------------------------------------------------------
def test_write_atomic_replaces_the_file_or_leaves_it_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    files.write_atomic(target, "old")
    assert target.read_text() == "old"
    files.write_atomic(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    files.write_atomic(target, lambda f: f.write(b"written by a callable"))
    assert target.read_bytes() == b"written by a callable"
    _disk_full_for(monkeypatch, "out.json")
    with pytest.raises(StorageError) as caught:
        files.write_atomic(target, "new")
    assert str(caught.value) == f"cannot write {target}: {FULL}"
    assert caught.value.exit_code == 4
    assert target.read_bytes() == b"written by a callable"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_append_names_the_file_it_cannot_write(tmp_path):
    target = tmp_path / "rows.jsonl"
    files.append(target, "a\n")
    files.append(target, "b\n")
    assert target.read_text() == "a\nb\n"
    target.unlink()
    target.mkdir()
    with pytest.raises(StorageError) as caught:
        files.append(target, "c\n")
    assert str(caught.value) == f"cannot write {target}: Is a directory"


# -- checkpoints --------------------------------------------------------------------------------
@pytest.mark.parametrize("failing", ["latest", "arrays.npz", "state.json"])
def test_a_refused_checkpoint_write_names_the_file_and_leaves_the_previous_one(tmp_path, monkeypatch,
                                                                              failing):
    checkpoint.save({"w": np.ones(3)}, tmp_path, 1)
    _disk_full_for(monkeypatch, failing)
    with pytest.raises(StorageError) as caught:
        checkpoint.save({"w": np.zeros(3)}, tmp_path, 2)
    named = tmp_path / failing if failing == "latest" else tmp_path / "iter_00000002" / failing
    assert str(caught.value) == (f"cannot write {named}: {FULL}; "
                                 "the previous checkpoint iter_00000001 is intact")
    assert _temporaries(tmp_path) == []
    assert (tmp_path / "latest").read_text() == "iter_00000001\n"
    monkeypatch.undo()
    found = checkpoint.find(tmp_path)
    assert found == tmp_path / "iter_00000001"
    np.testing.assert_array_equal(checkpoint.load(found)["w"], np.ones(3))


# -- summary.json and model.npz -----------------------------------------------------------------
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


# -- metrics.jsonl -------------------------------------------------------------------------------
def _log_trainer(out: Path, observation: dict):
    updater = SimpleNamespace(iteration=3, epoch_detail=0.25, readings=dict,  # the updater protocol
                              settle=lambda: None)
    return SimpleNamespace(out=str(out), updater=updater, elapsed_time=1.5, observation=observation)


def test_a_refused_metrics_rewrite_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"iteration": 1}\n')
    log = LogReport(lambda trainer: True)
    log.load_state_dict({"log": [{"iteration": 1}, {"iteration": 2}], "sums": {}, "counts": {}})
    _disk_full_for(monkeypatch, "metrics.jsonl")
    with pytest.raises(StorageError) as caught:
        log.initialize(_log_trainer(tmp_path, {}))
    assert str(caught.value) == f"cannot write {path}: {FULL}"
    assert path.read_text() == '{"iteration": 1}\n'
    assert _temporaries(tmp_path) == []


def test_a_refused_metrics_row_names_the_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = LogReport(lambda trainer: True)
    trainer = _log_trainer(tmp_path, {"loss": 1.0})
    log.initialize(trainer)
    path.unlink()
    path.mkdir()  # any refused open: a directory where the file was
    with pytest.raises(StorageError) as caught:
        log(trainer)
    assert str(caught.value) == f"cannot write {path}: Is a directory"


# -- strict JSON ---------------------------------------------------------------------------------


def test_metrics_rows_hold_null_for_nan_and_inf(tmp_path):
    optimizer = SimpleNamespace(learning_rate=-math.inf)
    log = LogReport(lambda trainer: True, optimizer)
    log.load_state_dict({"log": [{"iteration": 1, "train/loss": math.nan}], "sums": {}, "counts": {}})
    trainer = _log_trainer(tmp_path, {"loss": math.nan, "val/loss": np.float32("inf"), "accuracy": 0.5})
    log.initialize(trainer)
    log(trainer)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    rows = [_strict(line) for line in lines]
    assert isinstance(rows[1].pop("time"), str) and rows[1].pop("elapsed_s") > 0
    assert rows == [
        {"iteration": 1, "train/loss": None},
        {"iteration": 3, "epoch": 0.25, "lr": None, "train/accuracy": 0.5,
         "train/loss": None, "val/loss": None}]
    assert math.isnan(log.last["train/loss"])  # the state keeps the value itself


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


def test_saved_kvstore_optimizer_states_are_written_whole(tmp_path, monkeypatch):
    """The kvstore's save_optimizer_states goes through the same atomic writer: a refused
    write names the file and leaves the previous states loadable, with no temporary file."""
    import numpy

    from trainer_run import kvstore, optimizers

    kv = kvstore.create("local")
    kv.init(0, numpy.ones(4, dtype=numpy.float32))
    kv.set_optimizer(optimizers.create("sgd", learning_rate=0.1, momentum=0.9))
    kv.push(0, numpy.full(4, 0.5, dtype=numpy.float32))
    target = tmp_path / "states.npz"
    kv.save_optimizer_states(target)
    before = target.read_bytes()
    kv.push(0, numpy.full(4, 0.25, dtype=numpy.float32))
    _disk_full_for(monkeypatch, "states.npz")
    with pytest.raises(StorageError) as caught:
        kv.save_optimizer_states(target)
    assert str(caught.value) == f"cannot write {target}: {FULL}"
    assert target.read_bytes() == before and _temporaries(tmp_path) == []
    monkeypatch.undo()
    kv.load_optimizer_states(target)          # the previous states, still whole


# -- appending: a row whole or not at all --------------------------------------------------------
def _disk_fills_after(monkeypatch, written: int) -> None:
    """Makes os.write write at most ``written`` bytes, then refuse with ENOSPC (a disk that
    fills in the middle of an append)."""
    real, left = os.write, [written]

    def write(fd, data):
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, FULL)
        count = real(fd, bytes(data[:left[0]]))
        left[0] -= count
        return count

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("logger", ["jsonl", "csv"])
def test_a_row_the_disk_refuses_part_way_is_not_left_torn(tmp_path, monkeypatch, logger):
    from trainer_run.training.loggers.csv import CsvTable
    from trainer_run.training.loggers.jsonl import JsonLines

    made = JsonLines() if logger == "jsonl" else CsvTable()
    made.start(tmp_path, [{"iteration": 1, "loss": 1.0}])
    before = made.path.read_bytes()
    _disk_fills_after(monkeypatch, 5)
    with pytest.raises(StorageError) as caught:
        made.write({"iteration": 2, "loss": 0.5})
    assert str(caught.value) == f"cannot write {made.path}: {FULL}"
    assert made.path.read_bytes() == before
    monkeypatch.undo()
    made.write({"iteration": 3, "loss": 0.25})
    assert made.path.read_bytes().endswith(b"3,0.25\n" if logger == "csv" else b'"loss": 0.25}\n')
