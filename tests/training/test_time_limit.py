"""``trainer.max_time``: seconds or Lightning's ``DD:HH:MM:SS``; the run ends after the
iteration that crosses it (evaluated, logged and checkpointed as a last iteration), status
``completed``, ``stop_reason`` ``max_time``; a resume gets the whole limit again; the workers
of a synchronous run end after the same iteration; bad values are refused by name (from the
command line: tests/command/test_max_time.py)."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import make_synthetic, read_jsonl

from tests.updaters.test_updaters import ThreadStore
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import SerialIterator
from trainer_run.errors import ConfigError
from trainer_run.models import MLP
from trainer_run.storage import checkpoint
from trainer_run.training import AnyOf, IntervalTrigger, StopTrigger, Trainer
from trainer_run.training import trainer as trainer_module
from trainer_run.training.extensions import Evaluator, LogReport, Snapshot, Summary
from trainer_run.training.time_limit import seconds
from trainer_run.updaters import StandardUpdater, updater_of


@pytest.mark.parametrize("value,expected", [
    (3600, 3600.0), (0.5, 0.5), ("00:12:00:00", 43200.0), ("1:02:03:04", 93784.0),
    ("00:36:00:00", 129600.0), (" 00:00:00:01 ", 1.0), (None, None),
])
def test_max_time_is_seconds_or_lightnings_days_hours_minutes_seconds(value, expected):
    assert seconds(value) == expected


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), True, [1], "00:00:00:00",
                                   "12:00:00", "1:2:3:x", "", "-1:00:00:00", "1.5"])
def test_a_bad_max_time_is_refused_by_name(value):
    with pytest.raises(ConfigError, match="^max_time must be"):
        seconds(value)


class Clock:
    """A fake ``time.monotonic`` per thread: each thread's reads ``seconds_per_update`` times
    the updates it counted (:meth:`tick`)."""

    def __init__(self):
        self.ticks = {}

    def tick(self, seconds_per_update):
        def hook(iteration):
            key = threading.get_ident()
            self.ticks[key] = self.ticks.get(key, 0) + seconds_per_update
        return hook

    def __call__(self):
        return float(self.ticks.get(threading.get_ident(), 0))


@pytest.fixture
def clock(monkeypatch):
    """The trainer's ``time.monotonic``, replaced by a :class:`Clock` (its ``perf_counter``
    stays the real one)."""
    fake = Clock()
    monkeypatch.setattr(trainer_module, "time",
                        SimpleNamespace(perf_counter=time.perf_counter, monotonic=fake))
    return fake


DATA = make_synthetic("spirals", 400, 0.25, np.random.default_rng(0))


def make_trainer(out, clock, max_time=35, max_iterations=40, kvstore=None, seconds_per_update=10):
    """A small run whose clock advances ``seconds_per_update`` per update, with the run's
    extensions: evaluation and log every 20 iterations and at the end, a checkpoint every 20
    and at the end, the summary."""
    backend = get_backend("numpy", seed=0)
    model = MLP(DATA.in_size, DATA.out_size, backend, hidden_sizes=[16])
    iterator = SerialIterator(DATA.train, 30, rng=np.random.default_rng(1))
    opt = optimizers.create("sgd", learning_rate=0.1)
    updater = updater_of(StandardUpdater, iterator, opt, model, backend=backend, kvstore=kvstore,
                         callbacks={"update_on_finish": clock.tick(seconds_per_update)})
    stop = StopTrigger(max_iterations=max_iterations)
    trainer = Trainer(updater, stop, out=str(out), max_time=max_time)
    last = AnyOf(IntervalTrigger(20), stop, Trainer.stop_requested.fget)
    log = LogReport(last, opt)
    trainer.extend(Evaluator(DATA.val, model, 50, backend), trigger=last)
    trainer.extend(log)
    trainer.extend(Snapshot(), trigger=IntervalTrigger(20))
    trainer.extend(Summary(log, 30, updater.stores["main"]))
    return trainer


def test_the_run_ends_after_the_iteration_that_crosses_the_limit_as_a_completed_run(tmp_path, clock):
    """10 s per update, a limit of 35 s: update 4 ends at 40 s, so the run ends after it,
    completed, with that iteration evaluated, logged and checkpointed."""
    trainer = make_trainer(tmp_path, clock)
    trainer.run()
    assert (trainer.updater.iteration, trainer.status, trainer.stop_reason) == (4, "completed",
                                                                                 "max_time")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["iteration"], summary["status"], summary["stop_reason"]) == (4, "completed",
                                                                                 "max_time")
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [4] and "val/loss" in rows[0]
    assert checkpoint.find(tmp_path).name == checkpoint.name_of(4)


def test_a_resumed_run_gets_the_whole_limit_again(tmp_path, clock):
    """The second session's clock starts at its own start (40 s on the fake clock): it ends
    after 4 more updates, at iteration 8, not after its first (time carried over)."""
    make_trainer(tmp_path, clock).run()
    resumed = make_trainer(tmp_path, clock)
    resumed.load_state_dict(checkpoint.load(checkpoint.find(tmp_path))["trainer"])
    resumed.run()
    assert (resumed.updater.iteration, resumed.stop_reason) == (8, "max_time")


def test_the_iteration_limit_keeps_its_reason_when_both_are_reached_together(tmp_path, clock):
    trainer = make_trainer(tmp_path, clock, max_iterations=4)
    trainer.run()
    assert (trainer.updater.iteration, trainer.stop_reason) == (4, "max_iterations")


class Store(ThreadStore):
    """:class:`ThreadStore` as the end of a run uses it too."""

    def close(self):
        pass

    def abort(self, reason):
        pass


def test_two_workers_end_after_the_same_iteration_when_one_clock_crosses(tmp_path, clock):
    """Rank 0's clock advances 10 s per update, rank 1's not at all: rank 0 asks to end after
    update 4, its request travels with update 5's metrics, and both end after update 5 (a
    worker ending alone would leave the other waiting in the next sum: the barrier breaks)."""
    world = {"n": 2, "barrier": threading.Barrier(2, timeout=30)}
    trainers, errors = [None, None], []

    def train(rank):
        try:
            trainers[rank] = make_trainer(tmp_path / f"rank{rank}", clock,
                                          kvstore=Store(world, rank),
                                          seconds_per_update=10 if rank == 0 else 0)
            trainers[rank].run()
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)
            world["barrier"].abort()

    threads = [threading.Thread(target=train, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [(t.updater.iteration, t.stop_reason) for t in trainers] == [(5, "max_time")] * 2


@pytest.mark.parametrize("value, field", [("00:-1:00:00", "hours is -1"), ("-2:00:00:00", "days is -2"),
                                          ("00:00:-30:00", "minutes is -30"),
                                          ("00:01:00:-5", "seconds is -5")])
def test_a_negative_field_of_max_time_is_refused_by_name(value, field):
    with pytest.raises(ConfigError) as refused:
        seconds(value)
    message = str(refused.value)
    assert message.startswith("max_time must be DD:HH:MM:SS of whole numbers >= 0")
    assert f"got {value!r} ({field})" in message and "\n" not in message


def test_a_negative_field_that_sums_to_a_positive_time_is_refused_too():
    """``00:01:-30:00`` adds up to 30 minutes: still a mistake, never a silent sum."""
    with pytest.raises(ConfigError, match=r"\(minutes is -30\)"):
        seconds("00:01:-30:00")
