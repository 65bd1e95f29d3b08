"""ReduceOnPlateauScheduler (schedulers/plateau.py) against PyTorch's ReduceLROnPlateau rules simulated
by hand: patience, cooldown, thresholds, modes, the floor, NaN, warmup, the optimizer's starting
rate and the state."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from trainer_run import optimizers
from trainer_run.schedulers import (
    ReduceOnPlateauScheduler,
)


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-15)


def round_trip(state: dict) -> dict:
    """What a checkpoint gives back: the state through JSON."""
    return json.loads(json.dumps(state, allow_nan=False))


class TorchPlateau:
    """PyTorch's ReduceLROnPlateau.step transcribed (one param group, lr kept here)."""

    def __init__(self, lr, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
        self.lr, self.mode, self.factor, self.patience = lr, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown = threshold, threshold_mode, cooldown
        self.min_lr, self.eps = min_lr, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0

    def is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics):
        current = float(metrics)
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            new_lr = max(self.lr * self.factor, self.min_lr)
            if self.lr - new_lr > self.eps:
                self.lr = new_lr
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0


def feed(sched, values):
    """The rate after each value."""
    out = []
    for v in values:
        sched.step(v)
        out.append(sched(10**6))
    return out


def test_plateau_defaults_and_call():
    sched = ReduceOnPlateauScheduler(base_lr=0.1)
    assert (sched.monitor, sched.mode, sched.factor, sched.patience, sched.threshold,
            sched.threshold_mode, sched.cooldown, sched.min_lr, sched.eps) == (
        "val/loss", "min", 0.1, 10, 1e-4, "rel", 0, 0.0, 1e-8)
    assert sched(0) == sched(1) == sched(10**9) == 0.1
    assert sched.state_dict() == {"reductions": 0, "best": None, "num_bad_epochs": 0,
                                  "cooldown_counter": 0, "last_epoch": 0}


def test_plateau_patience_spelled_out():
    """patience 2: the rate drops on the third value in a row that is no better than best."""
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=2, threshold=0.0)
    values = [5, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3]
    assert feed(sched, values) == [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]
    assert (sched.best, sched.num_bad_epochs, sched.last_epoch) == (3.0, 2, 11)


def test_plateau_improvement_resets_the_count():
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=2, threshold=0.0)
    # bad, bad, better, bad, bad, better: never three bad in a row
    assert feed(sched, [5, 6, 7, 4, 4, 9, 3, 3, 3, 3]) == [1] * 9 + [0.5]


def test_plateau_cooldown_spelled_out():
    """After a drop the next `cooldown` values do not count as bad."""
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0, cooldown=2)
    assert feed(sched, [1.0] * 8) == [1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125]
    # an improvement during cooldown still becomes best
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0, cooldown=2)
    assert feed(sched, [1.0, 1.0, 0.5, 0.6, 0.6]) == [1, 0.5, 0.5, 0.5, 0.25]
    assert sched.best == 0.5


def test_plateau_threshold_rel_spelled_out():
    """rel, min: better means value < best * (1 - threshold)."""
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0, threshold=0.1)
    assert feed(sched, [10, 9.5, 8.9, 8.5, 8.0]) == [1, 0.5, 0.5, 0.25, 0.25]
    assert sched.best == 8.0


def test_plateau_threshold_abs_spelled_out():
    """abs, min: better means value < best - threshold."""
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0, threshold=0.5,
                                     threshold_mode="abs")
    assert feed(sched, [10, 9.6, 9.4, 9.0, 8.95]) == [1, 0.5, 0.5, 0.25, 0.125]
    assert sched.best == 9.4


def test_plateau_mode_max_spelled_out():
    sched = ReduceOnPlateauScheduler(base_lr=1.0, mode="max", factor=0.5, patience=1,
                                     threshold=0.0)
    assert feed(sched, [0.5, 0.6, 0.6, 0.59, 0.7, 0.7, 0.7]) == [1, 1, 1, 0.5, 0.5, 0.5, 0.25]
    # rel in max mode: better means value > best * (1 + threshold)
    rel = ReduceOnPlateauScheduler(base_lr=1.0, mode="max", factor=0.5, patience=0,
                                   threshold=0.1)
    assert feed(rel, [0.5, 0.54, 0.56, 0.6]) == [1, 0.5, 0.5, 0.25]
    absolute = ReduceOnPlateauScheduler(base_lr=1.0, mode="max", factor=0.5, patience=0,
                                        threshold=0.05, threshold_mode="abs")
    assert feed(absolute, [0.5, 0.54, 0.56, 0.6]) == [1, 0.5, 0.5, 0.25]
    assert absolute.best == 0.56


def test_plateau_min_lr_and_eps():
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.1, patience=0, min_lr=0.005)
    assert feed(sched, [1.0] * 6) == [approx(v) for v in (1, 0.1, 0.01, 0.005, 0.005, 0.005)]
    # a reduction of eps or less is skipped, but still starts the cooldown
    tiny = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.1, patience=0, min_lr=1.0 - 1e-9,
                                    cooldown=1)
    assert feed(tiny, [1.0, 1.0]) == [1.0, 1.0]
    assert (tiny.cooldown_counter, tiny.num_bad_epochs) == (1, 0)


def test_plateau_nan_counts_as_bad_and_first_value_rules():
    sched = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=1)
    assert feed(sched, [float("nan"), float("nan")]) == [1, 0.5]
    assert sched.best is None
    assert feed(sched, [float("inf")]) == [0.5]                  # inf is not < inf
    assert sched.best is None and sched.num_bad_epochs == 1
    assert feed(sched, [np.float32(2.0)]) == [0.5]               # NumPy scalars accepted
    assert sched.best == 2.0 and type(sched.best) is float
    # negative metric in rel mode: PyTorch compares with best * (1 - threshold), above best
    neg = ReduceOnPlateauScheduler(base_lr=1.0, factor=0.5, patience=0, threshold=0.1)
    assert feed(neg, [-1.0, -0.95]) == [1, 1]
    assert neg.best == -0.95


@pytest.mark.parametrize("kw", [
    dict(),
    dict(mode="max"),
    dict(threshold_mode="abs", threshold=0.05),
    dict(mode="max", threshold_mode="abs", threshold=0.02, cooldown=2),
    dict(patience=0, cooldown=1, factor=0.5, min_lr=0.01),
    dict(patience=3, cooldown=3, factor=0.7, threshold=0.0),
])
def test_plateau_matches_pytorch_rules_on_random_sequences(kw):
    kw = {"patience": 2, **kw}
    rng = random.Random(repr(sorted(kw.items())))
    sched = ReduceOnPlateauScheduler(base_lr=0.3, **kw)
    torch = TorchPlateau(0.3, **kw)
    value = 1.0
    for i in range(400):
        value += rng.choice([-0.2, -0.05, -0.01, 0.0, 0.0, 0.01, 0.05, 0.1])
        sched.step(value)
        torch.step(value)
        assert sched(i) == torch.lr, i
        assert sched.num_bad_epochs == torch.num_bad_epochs
        assert sched.cooldown_counter == torch.cooldown_counter
        assert sched.best == torch.best


def test_plateau_warmup():
    """The ramp rises to the construction base_lr; a reduction during the warmup lowers
    base_lr, used once the warmup is over."""
    sched = ReduceOnPlateauScheduler(base_lr=0.1, factor=0.1, patience=0, warmup_steps=4,
                                     warmup_begin_lr=0.02)
    assert [sched(n) for n in range(6)] == [approx(v) for v in (0.02, 0.04, 0.06, 0.08, 0.1, 0.1)]
    sched.step(1.0)
    sched.step(1.0)
    assert sched(2) == approx(0.06)
    assert sched(4) == approx(0.01)
    const = ReduceOnPlateauScheduler(base_lr=0.1, warmup_steps=4, warmup_begin_lr=0.02,
                                     warmup_mode="constant")
    assert [const(n) for n in range(6)] == [approx(v) for v in (0.02, 0.02, 0.02, 0.02, 0.1, 0.1)]


def test_plateau_optimizer_sets_the_starting_rate():
    sched = ReduceOnPlateauScheduler(base_lr=0.1, factor=0.5, patience=0)
    opt = optimizers.create("sgd", learning_rate=0.4, lr_scheduler=sched)
    assert opt.learning_rate == 0.4
    sched.step(1.0)
    sched.step(1.0)
    assert opt.learning_rate == 0.2


@pytest.mark.parametrize("split", [0, 1, 3, 5, 8])
def test_plateau_state_round_trip(split):
    kw = dict(base_lr=1.0, factor=0.5, patience=1, cooldown=2, threshold=0.01, min_lr=0.05)
    values = [3.0, 2.0, 2.0, 2.5, 2.1, 1.0, 1.2, 1.3, 1.4, 0.99, 1.0, 1.0, 1.0, 1.0, 1.0]
    sched = ReduceOnPlateauScheduler(**kw)
    feed(sched, values[:split])
    state = round_trip(sched.state_dict())                       # strict JSON: no Infinity
    restored = ReduceOnPlateauScheduler(**kw)
    optimizers.create("sgd", learning_rate=1.0, lr_scheduler=restored)   # as the run built it
    restored.load_state_dict(state)
    assert restored.state_dict() == sched.state_dict() and restored(0) == sched(0)
    assert feed(restored, values[split:]) == feed(sched, values[split:])
    assert restored.state_dict() == sched.state_dict()
    whole = ReduceOnPlateauScheduler(**kw)
    assert feed(whole, values)[-1] == sched(0)
    # another learning rate: the same reductions applied to it (floored at min_lr)
    lowered = ReduceOnPlateauScheduler(**kw)
    optimizers.create("sgd", learning_rate=0.4, lr_scheduler=lowered)
    lowered.load_state_dict(state)
    assert lowered(0) == approx(max(0.4 * 0.5 ** state["reductions"], 0.05))


def test_plateau_state_through_the_optimizer():
    sched = ReduceOnPlateauScheduler(base_lr=0.1, factor=0.5, patience=0, cooldown=1)
    opt = optimizers.create("sgd", learning_rate=0.1, lr_scheduler=sched)
    feed(sched, [1.0, 1.0])
    state = round_trip(opt.state_dict())
    other = ReduceOnPlateauScheduler(base_lr=0.1, factor=0.5, patience=0, cooldown=1)
    opt2 = optimizers.create("sgd", learning_rate=0.1, lr_scheduler=other)
    opt2.load_state_dict(state)
    assert other.state_dict() == sched.state_dict() and opt2.learning_rate == 0.05
