"""The decaying schedules, cosine and poly (schedulers/decay.py), against MXNet 1.9.1's formulas
written out by hand: every update, the last value kept after max_update, the base rate of
construction, state round trips."""

from __future__ import annotations

import json
import math

import pytest

from tests.schedulers.test_base import WARMUPS, approx, hand_warmup, round_trip
from trainer_run import optimizers
from trainer_run.schedulers import (
    CosineScheduler,
    PolyScheduler,
)


class HandDecay:
    """MXNet 1.9's decaying schedules: after the warmup, ``final + (base - final) *
    shape(progress)`` up to max_update; past it the last value computed (its mutable
    ``base_lr``), which starts as the constructor's base_lr."""

    def __init__(self, max_update, base_lr, final_lr=0.0, warmup_steps=0, warmup_begin_lr=0.0,
                 warmup_mode="linear"):
        self.max_update, self.base, self.final = max_update, base_lr, final_lr
        self.warmup = dict(base_lr=base_lr, warmup_steps=warmup_steps,
                           warmup_begin_lr=warmup_begin_lr, warmup_mode=warmup_mode)
        self.warmup_steps = warmup_steps
        self.last = base_lr

    def __call__(self, n):
        if n < self.warmup_steps:
            return hand_warmup(n, **self.warmup)
        if n <= self.max_update:
            progress = (n - self.warmup_steps) / (self.max_update - self.warmup_steps)
            self.last = self.final + (self.base - self.final) * self.shape(progress)
        return self.last


class HandCosine(HandDecay):
    """MXNet 1.9 CosineScheduler."""

    def shape(self, progress):
        return (1 + math.cos(math.pi * progress)) / 2


@pytest.mark.parametrize("warmup_mode", ["linear", "constant"])
@pytest.mark.parametrize("warmup_steps", [0, 3])
@pytest.mark.parametrize("final_lr", [0.0, 0.005])
def test_cosine_scheduler_every_update(warmup_steps, warmup_mode, final_lr):
    max_update = 12
    kw = dict(base_lr=0.1, final_lr=final_lr, warmup_steps=warmup_steps,
              warmup_begin_lr=0.01, warmup_mode=warmup_mode)
    sched = CosineScheduler(max_update, **kw)
    hand = HandCosine(max_update, **kw)
    for n in range(0, max_update + 6):
        assert sched(n) == approx(hand(n)), n
    # end points of the decay
    fresh = CosineScheduler(max_update, **kw)
    assert fresh(warmup_steps) == approx(0.1)
    assert fresh(max_update) == approx(final_lr)
    assert fresh(max_update + 5) == approx(final_lr)


def test_cosine_scheduler_values_spelled_out():
    sched = CosineScheduler(max_update=4, base_lr=1.0, final_lr=0.0)
    half = (1 + math.cos(math.pi / 4)) / 2
    expected = [1.0, half, 0.5, 1 - half, 0.0, 0.0, 0.0]
    assert [sched(n) for n in range(7)] == [approx(v) for v in expected]


def test_cosine_keeps_last_computed_value_after_max_update():
    """MXNet 1.9 does not clamp to final_lr: it returns whatever it computed last."""
    sched = CosineScheduler(max_update=10, base_lr=0.1, final_lr=0.0)
    hand = HandCosine(10, base_lr=0.1, final_lr=0.0)
    assert sched(7) == approx(hand(7))
    assert sched(15) == approx(hand(7))        # jumped past max_update: value at 7
    assert sched(100) == approx(hand(7))
    # never called inside the schedule: its base_lr (the constructor's value)
    assert CosineScheduler(max_update=10, base_lr=0.1, final_lr=0.0)(11) == approx(0.1)


def test_cosine_decays_from_construction_base_lr_even_if_base_lr_is_overwritten():
    """The optimizer writes its learning_rate into base_lr; MXNet's cosine decays from
    base_lr_orig, taken at construction."""
    sched = CosineScheduler(max_update=4, base_lr=0.1, final_lr=0.0)
    sched.base_lr = 0.5
    hand = HandCosine(4, base_lr=0.1, final_lr=0.0)
    for n in range(0, 7):
        assert sched(n) == approx(hand(n))


def test_cosine_state_round_trip():
    kw = dict(base_lr=0.1, final_lr=0.01, warmup_steps=2, warmup_begin_lr=0.0)
    sched = CosineScheduler(10, **kw)
    for n in range(0, 7):
        sched(n)
    state = json.loads(json.dumps(sched.state_dict()))
    restored = CosineScheduler(10, **kw)
    restored.load_state_dict(state)
    # past max_update the value depends on the restored mutable state
    assert restored(20) == sched(20) == approx(HandCosine(10, **kw)(6))
    for n in range(7, 14):
        assert restored(n) == sched(n)
    # the state is the update last computed; its value follows the parameters it is loaded into
    assert state == {"last_update": 6}
    other = CosineScheduler(10, **{**kw, "final_lr": 0.05})
    other.load_state_dict(state)
    assert other(20) == approx(HandCosine(10, **{**kw, "final_lr": 0.05})(6))


class HandPoly(HandDecay):
    """MXNet 1.9 PolyScheduler."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, **rest):
        super().__init__(max_update, base_lr, **rest)
        self.pwr = pwr

    def shape(self, progress):
        return (1 - progress) ** self.pwr


@pytest.mark.parametrize("warmup", WARMUPS)
@pytest.mark.parametrize("pwr", [2, 1, 0.5, 3])
@pytest.mark.parametrize("final_lr", [0.0, 0.002])
def test_poly_every_update(pwr, final_lr, warmup):
    max_update = 12
    kw = dict(base_lr=0.1, pwr=pwr, final_lr=final_lr, **warmup)
    sched = PolyScheduler(max_update, **kw)
    hand = HandPoly(max_update, **kw)
    for n in range(0, max_update + 6):
        assert sched(n) == approx(hand(n)), n
    fresh = PolyScheduler(max_update, **kw)
    assert fresh(warmup["warmup_steps"]) == approx(0.1)
    assert fresh(max_update) == approx(final_lr)


def test_poly_values_spelled_out():
    sched = PolyScheduler(max_update=4, base_lr=1.0)             # pwr 2, final_lr 0
    assert [sched(n) for n in range(7)] == [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0, 0.0]
    linear = PolyScheduler(max_update=4, base_lr=1.0, pwr=1, final_lr=0.2, warmup_steps=2,
                           warmup_begin_lr=0.1)
    assert [linear(n) for n in range(7)] == [approx(v) for v in
                                             (0.1, 0.55, 1.0, 0.6, 0.2, 0.2, 0.2)]


def test_poly_keeps_last_computed_value_after_max_update():
    sched = PolyScheduler(max_update=10, base_lr=0.1, pwr=2)
    hand = HandPoly(10, base_lr=0.1, pwr=2)
    assert sched(6) == approx(hand(6))
    assert sched(15) == approx(hand(6)) == approx(0.1 * 0.4 ** 2)
    assert sched(3) == approx(hand(3))             # inside the schedule again: recomputed
    assert sched(100) == approx(hand(3))
    assert PolyScheduler(max_update=10, base_lr=0.1)(11) == 0.1   # never computed: base_lr


def test_poly_decays_from_construction_base_lr():
    sched = PolyScheduler(max_update=4, base_lr=0.1)
    optimizers.create("sgd", learning_rate=0.5, lr_scheduler=sched)
    assert sched.base_lr == 0.5
    assert sched(5) == 0.5                          # nothing computed yet
    assert sched(2) == approx(0.1 * 0.25)           # from base_lr_orig, as MXNet
    assert sched(9) == approx(0.1 * 0.25)


def test_poly_state_round_trip_mid_schedule():
    kw = dict(base_lr=0.1, pwr=2, final_lr=0.01, warmup_steps=2, warmup_begin_lr=0.0)
    sched = PolyScheduler(10, **kw)
    for n in range(0, 7):
        sched(n)
    restored = PolyScheduler(10, **kw)
    restored.load_state_dict(round_trip(sched.state_dict()))
    assert restored(20) == sched(20) == approx(HandPoly(10, **kw)(6))
    for n in range(7, 14):
        assert restored(n) == sched(n)
