"""The triggers (training/triggers.py): Chainer's interval rules."""

import pytest

from trainer_run.errors import ConfigError
from trainer_run.training import IntervalTrigger, StopTrigger, triggers


class _Iterator:
    def __init__(self, epoch_detail):
        self.iteration, self.epoch_detail, self.previous_epoch_detail = 0, epoch_detail, None


class _T:
    def __init__(self, iteration, previous, current):
        self.updater = _Iterator(current)
        self.updater.iteration = iteration
        self.updater.previous_epoch_detail = previous


def test_interval_trigger_rules():
    every3 = IntervalTrigger(3)
    assert [every3(_T(i, None, 0)) for i in range(1, 7)] == [False, False, True, False, False, True]
    per_epoch = IntervalTrigger(1, "epoch")
    assert per_epoch(_T(0, 0.9, 1.2)) and not per_epoch(_T(0, 1.2, 1.5))
    half = IntervalTrigger(0.5, "epoch")
    assert half(_T(0, 0.4, 0.6)) and not half(_T(0, 0.6, 0.9))
    stop = StopTrigger(max_iterations=5, max_epochs=2)
    assert not stop(_T(4, None, 1.9)) and stop(_T(5, None, 1.0)) and stop(_T(1, None, 2.0))
    assert stop.total_iterations(iterations_per_epoch=2.0) == 4


# -- intervals from the config: iterations or epochs (issue 40 item 0) ------------------------------
@pytest.mark.parametrize("value, period, unit", [
    (200, 200, "iteration"), ("200", 200, "iteration"), ("200iterations", 200, "iteration"),
    ("1epoch", 1.0, "epoch"), ("0.5epoch", 0.5, "epoch"), ("2 epochs", 2.0, "epoch"),
    (".25epoch", 0.25, "epoch"), ("1e-9epoch", 1e-9, "epoch"), ("2.5E2 epochs", 250.0, "epoch"),
    ("2e3", 2000, "iteration"), ("1e2iterations", 100, "iteration"),
])
def test_an_interval_is_iterations_or_epochs(value, period, unit):
    trigger = triggers.interval("trainer.eval_interval", value)
    assert (trigger.period, trigger.unit) == (period, unit)


@pytest.mark.parametrize("value, message", [
    ("abc", "trainer.eval_interval=abc is neither an integer number of iterations (200) nor a "
     "number of epochs (1epoch, 0.5epoch, 1e-3epoch)"),
    ("0epoch", "trainer.eval_interval=0epoch: a number of epochs must be > 0 and finite"),
    ("1e400epoch", "trainer.eval_interval=1e400epoch: a number of epochs must be > 0 and finite"),
    ("1e-1iterations", "a number of iterations is a whole number >= 1"),
    ("2.5iterations", "a number of iterations is a whole number >= 1"),
    (0, "trainer.eval_interval must be >= 1, got 0"),
    (1.5, "trainer.eval_interval must be an integer number of iterations (200) or a number of "
     "epochs"),
    (True, "trainer.eval_interval must be an integer number of iterations (200) or a number of "
     "epochs"),
])
def test_an_interval_of_neither_is_refused_naming_the_key(value, message):
    with pytest.raises(ConfigError) as raised:
        triggers.interval("trainer.eval_interval", value)
    assert message in str(raised.value)


def test_epoch_intervals_fire_where_the_epochs_are_crossed(tmp_path):
    """400 training examples in batches of 64: 6.25 iterations an epoch, so the epochs end
    inside iterations 7, 13, 19 and exactly at 25 (hand-computed); half epochs at 3.125, 6.25,
    ... end inside iterations 4, 7, 10, 13, 16, 19, 22 and at 25. Checkpoints follow the same
    rule, and the last iteration logs and evaluates as with iteration intervals."""
    from helpers import read_jsonl

    import trainer_run

    run = trainer_run.train(["dataset.size=500", "dataset.batch_size=64", "trainer.max_iterations=27",
                             "trainer.eval_interval=1epoch", "trainer.log_interval=0.5epoch",
                             "trainer.checkpoint_interval=1epoch", "trainer.keep_checkpoints=10",
                             "trainer.progress=false"], run_dir=tmp_path / "run")
    rows = read_jsonl(run.dir / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [4, 7, 10, 13, 16, 19, 22, 25, 27]
    assert [r["iteration"] for r in rows if "val/loss" in r] == [7, 13, 19, 25, 27]
    assert [r["epoch"] for r in rows][:2] == [4 * 64 / 400, 7 * 64 / 400]
    kept = sorted(p.name for p in (run.dir / "checkpoints").glob("iter_*"))
    assert kept[:4] == ["iter_00000007", "iter_00000013", "iter_00000019", "iter_00000025"]


class Counting:
    """Wraps a trigger and records the iterations it is asked at."""

    def __init__(self, trigger):
        self.trigger, self.asked = trigger, []

    def __call__(self, trainer):
        self.asked.append(trainer.updater.iteration)
        return self.trigger(trainer)

    def first_firing(self, iteration):
        return triggers.first_firing(self.trigger, iteration)


class _Run:
    """A trainer's view for triggers: the iteration, and whether a stop is requested."""

    def __init__(self):
        self.updater = _Iterator(0.0)
        self.stop_requested = False


@pytest.mark.parametrize("trigger, fires", [
    (IntervalTrigger(7), [i for i in range(1, 1001) if i % 7 == 0]),
    (triggers.AnyOf(IntervalTrigger(300), StopTrigger(max_iterations=1000)), [300, 600, 900, 1000]),
    (triggers.AnyOf(IntervalTrigger(250), StopTrigger(max_iterations=990), triggers.STOP_REQUESTED),
     [250, 500, 750, *range(990, 1001)]),
])
def test_an_asked_trigger_fires_where_it_did_and_is_asked_nowhere_else(trigger, fires):
    counting = Counting(trigger)
    asked, run, fired = triggers.Asked(counting), _Run(), []
    for iteration in range(1, 1001):
        run.updater.iteration = iteration
        if asked(run):
            fired.append(iteration)
    assert fired == fires
    assert counting.asked == [1, *fires]  # the first call finds where it is due


def test_a_stop_request_has_every_trigger_asked():
    counting = Counting(triggers.AnyOf(IntervalTrigger(100), triggers.STOP_REQUESTED))
    asked, run = triggers.Asked(counting), _Run()
    fired = []
    for iteration in range(1, 301):
        run.updater.iteration, run.stop_requested = iteration, iteration == 123
        if asked(run):
            fired.append(iteration)
    assert fired == [100, 123, 200, 300]
    assert counting.asked == [1, 100, 123, 200, 300]


def test_a_trigger_that_cannot_say_where_it_fires_is_asked_every_iteration():
    epochs = IntervalTrigger(0.5, "epoch")
    assert epochs.first_firing(10) is None
    assert triggers.AnyOf(IntervalTrigger(10), epochs).first_firing(3) is None
    assert StopTrigger(max_iterations=50, max_epochs=2).first_firing(3) is None
    assert StopTrigger(max_iterations=50).first_firing(3) == 50
    assert StopTrigger(max_iterations=50).first_firing(70) == 70
    seen = []

    def users(trainer):  # a user's callable: no first_firing
        seen.append(trainer.updater.iteration)
        return trainer.updater.iteration in (5, 9)

    asked, run, fired = triggers.Asked(users), _Run(), []
    for iteration in range(1, 11):
        run.updater.iteration = iteration
        if asked(run):
            fired.append(iteration)
    assert fired == [5, 9] and seen == list(range(1, 11))
