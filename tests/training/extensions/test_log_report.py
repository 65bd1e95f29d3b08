"""LogReport (training/extensions/log_report.py) and metrics.jsonl: a refused rewrite or row names the
file and keeps what was there; NaN and infinity are written as null."""

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
from trainer_run.training.extensions import LogReport


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


def test_log_finish_tells_each_logger_how_the_run_ended_and_a_failing_one_is_a_warning():
    from trainer_run.training.extensions import LogFinish
    from trainer_run.training.loggers import UsersLogger

    told = []

    class Finishing:
        def __init__(self, name):
            self.name = name

        def start(self, out, rows): pass
        def write(self, row): pass
        def close(self): pass

        def finish(self, status):
            if self.name == "broken":
                raise ConnectionError("server gone")
            told.append((self.name, status))

    class Plain:  # no finish: it is optional
        def start(self, out, rows): pass
        def write(self, row): pass
        def close(self): pass

    loggers = [UsersLogger("logger.first", Finishing("first")), UsersLogger("logger.plain", Plain()),
               UsersLogger("logger.broken", Finishing("broken")), Finishing("last")]
    reported = []
    finish = LogFinish(LogReport((1, "iteration"), loggers=loggers), report=reported.append)
    finish.finalize(SimpleNamespace(status="interrupted"))
    assert told == [("first", "interrupted"), ("last", "interrupted")]
    assert len(reported) == 1 and reported[0].startswith("logger.broken (")
    assert "finish()" in reported[0] and "server gone" in reported[0]
    assert reported[0].endswith("; the run is interrupted as it was, its own files complete")


class _Rows:
    """A logger that keeps what it is given."""

    def __init__(self):
        self.rows, self.closed = [], False

    def start(self, out, rows): pass
    def write(self, row): self.rows.append(row)
    def close(self): self.closed = True


def test_an_evaluation_between_log_points_is_its_own_row_and_training_stays_averaged(tmp_path):
    """Log points every 3 iterations, evaluations at 2 and 3: the evaluation at 2 is a row of
    its own (never averaged into the next), the one at 3 joins the log point's row, whose
    training values are the means of iterations 1 to 3."""
    from trainer_run import host_reads

    sink = _Rows()
    log = LogReport(lambda trainer: trainer.updater.iteration % 3 == 0, loggers=[sink])
    trainer = _log_trainer(tmp_path, {})
    log.initialize(trainer)
    observed = {1: {"loss": 1.0}, 2: {"loss": 2.0, "val/loss": 0.5, "val/ema/loss": 0.25},
                3: {"loss": 6.0, "val/loss": 0.125}}
    for iteration, observation in observed.items():
        trainer.updater.iteration, trainer.observation = iteration, observation
        before = host_reads.count()
        log(trainer)
        assert host_reads.count() - before == (iteration != 1)    # one read per row
    rows = [{k: v for k, v in row.items() if k not in ("time", "elapsed_s")} for row in sink.rows]
    assert rows == [{"iteration": 2, "epoch": 0.25, "val/ema/loss": 0.25, "val/loss": 0.5},
                    {"iteration": 3, "epoch": 0.25, "train/loss": 3.0, "val/loss": 0.125}]
    assert log.log == sink.rows and log.point == 3
    assert log.latest_of("val/ema/loss") == 0.25 and log.latest_of("val/accuracy") is None


def test_a_late_evaluation_is_a_row_at_the_last_iteration_of_a_completed_run(tmp_path):
    """``late`` (SWA's evaluation) is asked once the run completed, its row logged before the
    loggers close; an interrupted run asks nothing; a refused row still closes the loggers."""
    for status, rows in (("completed", [{"iteration": 3, "epoch": 0.25, "val/swa/loss": 0.5}]),
                         ("interrupted", [])):
        sink = _Rows()
        log = LogReport(lambda trainer: False, loggers=[sink], late=[lambda: {"val/swa/loss": 0.5}])
        trainer = _log_trainer(tmp_path, {})
        trainer.status = status
        log.initialize(trainer)
        log.finalize(trainer)
        assert [{k: v for k, v in r.items() if k not in ("time", "elapsed_s")} for r in sink.rows] == rows
        assert sink.closed
    sink = _Rows()
    sink.write = lambda row: (_ for _ in ()).throw(OSError("refused"))
    log = LogReport(lambda trainer: False, loggers=[sink], late=[lambda: {"val/swa/loss": 0.5}])
    trainer.status = "completed"
    with pytest.raises(OSError, match="refused"):
        log.finalize(trainer)
    assert sink.closed
