"""The run's objective, early stopping and the best checkpoints, from Python, against sequences
of values whose outcome is computed by hand."""

import math

import numpy as np
import pytest

from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint
from trainer_run.training.extensions import EarlyStopping, Objective


class _Updater:
    """The iteration alone: extensions read the trainer's observation, never the updater's."""

    def __init__(self):
        self.iteration = 0


class _Trainer:
    """Just what the objective and early stopping read: the iteration and the observation."""

    def __init__(self):
        self.updater = _Updater()
        self.observation = {}
        self.stopped = None

    def request_stop(self, reason):
        self.stopped = (self.updater.iteration, reason)


def _every(n):
    return lambda trainer: trainer.updater.iteration % n == 0


def _feed(values, objective, *extensions, period=10, key="val/loss"):
    """Evaluations with ``values`` every ``period`` iterations; returns the trainer."""
    trainer = _Trainer()
    for value in values:
        for _ in range(period):
            trainer.updater.iteration += 1
            trainer.observation = {key: value} if trainer.updater.iteration % period == 0 else {}
            for extension in (objective, *extensions):
                extension(trainer)
            if trainer.stopped:
                return trainer
    return trainer


def test_min_objective_keeps_the_best_value_its_iteration_and_the_top_k():
    objective = Objective("val/loss", "min", _every(10), keep=2)
    _feed([0.9, 0.5, 0.7, 0.4, 0.6, float("nan")], objective)
    assert (objective.best, objective.best_iteration) == (0.4, 40)
    assert math.isnan(objective.final)  # the latest value, NaN included; never the best
    assert objective.top == [[0.4, 40], [0.5, 20]]
    assert objective.summary()["best_iteration"] == 40


def test_max_objective_ranks_the_other_way():
    objective = Objective("val/accuracy", "max", _every(5), keep=3)
    _feed([0.6, 0.9, 0.7, 0.8, 0.5], objective, period=5, key="val/accuracy")
    assert (objective.best, objective.best_iteration) == (0.9, 10)
    assert objective.kept_iterations == [10, 20, 15]


def test_an_evaluation_entering_the_top_k_is_flagged_for_a_checkpoint():
    objective = Objective("val/loss", "min", _every(10), keep=2)
    trainer = _Trainer()
    entered = []
    for value in [0.5, 0.6, 0.7, 0.55, 0.4]:
        trainer.updater.iteration += 10
        trainer.observation = {"val/loss": value}
        objective(trainer)
        entered.append(objective.entered(trainer))
    # top 2 after each: [.5], [.5,.6], [.5,.6] (0.7 out), [.5,.55], [.4,.5]
    assert entered == [True, True, False, True, True]


def test_train_metric_is_the_mean_since_the_previous_evaluation():
    """``train/loss`` is the training step's ``loss`` in the trainer's observation (a bare name),
    not the evaluator's ``val/loss`` beside it."""
    objective = Objective("train/loss", "min", _every(4))
    trainer = _Trainer()
    losses = [4.0, 2.0, 3.0, 1.0, 0.5, 0.5, 0.5, 2.5]
    for loss in losses:
        trainer.updater.iteration += 1
        trainer.observation = {"loss": loss, "val/loss": 100.0}
        objective(trainer)
    assert objective.best == pytest.approx(1.0) and objective.best_iteration == 8
    assert objective.final == pytest.approx(1.0)  # (0.5 + 0.5 + 0.5 + 2.5) / 4


def test_missing_metric_names_the_metrics_there_are():
    objective = Objective("val/los", "min", _every(1))
    trainer = _Trainer()
    trainer.updater.iteration = 1
    trainer.observation = {"val/loss": 1.0, "val/accuracy": 0.5, "loss": 2.0}
    with pytest.raises(ConfigError, match=r"val/los is not among .*train/loss, val/accuracy, val/loss"):
        objective(trainer)


@pytest.mark.parametrize("metric, mode", [("test/accuracy", "max"), ("loss", "min"), ("val/loss", "low")])
def test_bad_objective_settings_are_refused(metric, mode):
    with pytest.raises(ConfigError, match="objective"):
        Objective(metric, mode, _every(1))


def test_early_stopping_counts_evaluations_without_improvement():
    objective = Objective("val/loss", "min", _every(10))
    stopping = EarlyStopping(objective, patience=2)
    trainer = _feed([1.0, 0.8, 0.9, 0.7, 0.75, 0.71, 0.6], objective, stopping)
    # waits: 1.0 ref, 0.8 ref, 0.9 w1, 0.7 ref, 0.75 w1, 0.71 w2 -> stop at the 6th evaluation
    assert trainer.stopped == (60, "early_stopping")


def test_early_stopping_min_delta_needs_a_large_enough_improvement():
    objective = Objective("val/accuracy", "max", _every(10))
    stopping = EarlyStopping(objective, patience=2, min_delta=0.05)
    trainer = _feed([0.5, 0.54, 0.56, 0.58, 0.7], objective, stopping, key="val/accuracy")
    # reference 0.5; 0.54 (+0.04) w1; 0.56 (+0.06) new reference; 0.58 (+0.02) w1; 0.7 ref
    assert trainer.stopped is None and stopping.reference == 0.7 and stopping.wait == 0
    objective = Objective("val/accuracy", "max", _every(10))
    trainer = _feed([0.5, 0.54, 0.53], objective, EarlyStopping(objective, 2, 0.05),
                    key="val/accuracy")
    assert trainer.stopped == (30, "early_stopping")


def test_early_stopping_state_carries_over():
    objective = Objective("val/loss", "min", _every(10))
    stopping = EarlyStopping(objective, patience=3)
    _feed([1.0, 1.1, 1.2], objective, stopping)
    state, goal = stopping.state_dict(), objective.state_dict()
    objective2 = Objective("val/loss", "min", _every(10))
    objective2.load_state_dict(goal)
    resumed = EarlyStopping(objective2, patience=3)
    resumed.load_state_dict(state)
    trainer = _feed([1.05], objective2, resumed)
    assert trainer.stopped == (10, "early_stopping")  # the third evaluation in a row without one
    assert objective2.best == 1.0


def test_stop_request_ends_the_loop_with_its_reason(tmp_path):
    from tests.training.test_trainer import _trainer

    trainer = _trainer(tmp_path, max_iterations=40)
    trainer.extend(lambda t: t.request_stop("early_stopping") if t.updater.iteration == 13 else None,
                   name="stopper")
    trainer.run()
    assert trainer.updater.iteration == 13 and trainer.status == "completed"
    assert trainer.stop_reason == "early_stopping"
    full = _trainer(tmp_path / "full", max_iterations=40)
    full.run()
    assert full.stop_reason == "max_iterations"


def test_retention_keeps_the_protected_best_checkpoints(tmp_path):
    state = {"w": np.arange(3.0)}
    for iteration in (10, 20, 30, 40, 50):
        protect = [checkpoint.name_of(20)] if iteration >= 20 else []
        checkpoint.save(state, tmp_path, iteration, keep=2, protect=protect)
    checkpoint.mark_best(tmp_path, 20)
    names = [p.name for p in checkpoint.list_checkpoints(tmp_path)]
    assert names == ["iter_00000020", "iter_00000040", "iter_00000050"]
    assert (tmp_path / checkpoint.BEST).read_text().strip() == "iter_00000020"
    assert checkpoint.find(tmp_path).name == "iter_00000050"  # resume goes on from the latest


def test_a_validation_objective_is_called_where_it_evaluates_alone_and_its_entry_can_say_so():
    from trainer_run.training import AnyOf, IntervalTrigger, StopTrigger, triggers

    at = AnyOf(IntervalTrigger(40), StopTrigger(max_iterations=100), triggers.STOP_REQUESTED)
    validation, training = Objective("val/loss", "min", at), Objective("train/loss", "min", at)
    assert validation.trigger is at  # nothing to sum between evaluations
    assert training.trigger == (1, "iteration")  # sums the training step's loss every iteration
    assert [validation.entered.first_firing(i) for i in (1, 40, 41, 81, 101)] == [40, 40, 80, 100,
                                                                                   101]
