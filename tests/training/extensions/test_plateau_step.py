"""The PlateauStep extension (training/extensions/plateau_step.py), which feeds a plateau schedule its
monitored value: the metric it reads, iterations without an evaluation, a missing key, a schedule
without step, and in the training loop."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_run import optimizers
from trainer_run.errors import ConfigError
from trainer_run.schedulers import (
    ReduceOnPlateauScheduler,
)
from trainer_run.training import AnyOf, IntervalTrigger, StopTrigger, Trainer
from trainer_run.training.extensions.plateau_step import PlateauStep
from trainer_run.training.trainer import PRIORITY_EDITOR, PRIORITY_READER, PRIORITY_WRITER


class FakeUpdater:
    """The iteration alone: PlateauStep reads the trainer's observation, never the updater's."""

    def __init__(self):
        self.iteration = 0


class FakeTrainer:
    def __init__(self, observation):
        self.updater = FakeUpdater()
        self.observation = dict(observation)


def test_plateau_step_feeds_the_monitored_value():
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0)
    ext = PlateauStep(sched)
    assert ext.priority == PRIORITY_EDITOR
    assert ext.name == "plateau_step"
    for loss in (2.0, 2.0, 1.0, 1.5):
        ext(FakeTrainer({"loss": 0.3, "val/loss": np.float64(loss), "val/accuracy": 0.5}))
    assert sched.last_epoch == 4 and sched.best == 1.0 and sched(0) == 0.25


def test_plateau_step_other_monitor_and_train_metric():
    sched = ReduceOnPlateauScheduler(base_lr=1.0, monitor="val/accuracy", mode="max")
    PlateauStep(sched)(FakeTrainer({"val/loss": 1.0, "val/accuracy": 0.75}))
    assert sched.best == 0.75
    train = ReduceOnPlateauScheduler(base_lr=1.0, monitor="loss")
    PlateauStep(train)(FakeTrainer({"loss": 0.5}))
    assert train.best == 0.5


def test_plateau_step_skips_iterations_without_evaluation():
    """An observation of the training step's keys alone (bare names) is no evaluation."""
    sched = ReduceOnPlateauScheduler(base_lr=1.0)
    ext = PlateauStep(sched)
    ext(FakeTrainer({"loss": 0.3, "accuracy": 0.9}))
    ext(FakeTrainer({}))
    assert sched.last_epoch == 0 and sched.best is None


def test_plateau_step_missing_key_after_evaluation_is_a_config_error():
    ext = PlateauStep(ReduceOnPlateauScheduler(monitor="val/los"))
    trainer = FakeTrainer({"loss": 0.3, "val/loss": 1.0, "val/accuracy": 0.5})
    with pytest.raises(ConfigError, match=r"^scheduler\.monitor='val/los' .*val/accuracy, val/loss"):
        ext(trainer)
    # a trainer with the observation alone: its keys tell what an evaluator wrote
    with pytest.raises(ConfigError, match="val/los"):
        ext(type("T", (), {"observation": {"val/loss": 1.0}})())


def test_plateau_step_refuses_a_scheduler_without_step():
    from trainer_run.schedulers import ConstantScheduler

    with pytest.raises(TypeError, match="ConstantScheduler"):
        PlateauStep(ConstantScheduler())


class CountingUpdater:
    """Enough of an updater for Trainer.run: counts iterations, reports a train loss."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.iteration = 0
        self.epoch_detail = 0.0
        self.previous_epoch_detail = None
        self.observation: dict = {}
        self.lrs: list = []

    def update(self):
        self.optimizer.num_update += 1
        self.lrs.append(self.optimizer.learning_rate)      # the rate this update uses
        self.iteration += 1
        self.observation = {"loss": 1.0}

    def agree_to_stop(self, signum):
        return signum

    def settle(self):
        pass

    def abort(self, reason):
        pass

    def finalize(self):
        pass

    def state_dict(self):
        return {"iteration": self.iteration, "optimizer": self.optimizer.state_dict()}


class FakeEvaluator:
    """Writes val/loss (a fixed sequence) with the evaluator's priority."""

    priority = PRIORITY_WRITER
    name = "evaluator"

    def __init__(self, values):
        self.values = list(values)

    def __call__(self, trainer):
        trainer.observation["val/loss"] = self.values.pop(0)


def test_plateau_step_in_the_training_loop(tmp_path):
    """Registered before the evaluator, it still runs after it in the same iteration, on
    the evaluator's trigger; the next update uses the reduced rate."""
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0)
    opt = optimizers.create("sgd", learning_rate=1.0, lr_scheduler=sched)
    updater = CountingUpdater(opt)
    stop = StopTrigger(max_iterations=12)
    trainer = Trainer(updater, stop, out=str(tmp_path))
    eval_trigger = AnyOf(IntervalTrigger(4), stop)
    trainer.extend(PlateauStep(sched), trigger=eval_trigger)
    trainer.extend(FakeEvaluator([3.0, 3.0, 2.0]), trigger=eval_trigger)
    seen = []
    trainer.extend(lambda t: seen.append((t.updater.iteration, opt.learning_rate)),
                   name="reader", trigger=eval_trigger, priority=PRIORITY_READER)
    trainer.run()
    assert sched.last_epoch == 3
    assert seen == [(4, 1.0), (8, 0.5), (12, 0.5)]
    assert updater.lrs == [1.0] * 8 + [0.5] * 4


def test_plateau_step_missing_key_stops_the_loop(tmp_path):
    sched = ReduceOnPlateauScheduler(monitor="val/acc")
    opt = optimizers.create("sgd", learning_rate=1.0, lr_scheduler=sched)
    trainer = Trainer(CountingUpdater(opt), StopTrigger(max_iterations=10), out=str(tmp_path))
    trainer.extend(PlateauStep(sched))                    # every iteration
    trainer.extend(FakeEvaluator([1.0]), trigger=IntervalTrigger(3))
    with pytest.raises(ConfigError, match="val/acc"):
        trainer.run()
    assert trainer.updater.iteration == 3 and trainer.status == "failed"
