"""FactorScheduler and MultiFactorScheduler (schedulers/steps.py) against MXNet 1.9.1's formulas
written out by hand: every update, warmup, the floor, jumps and calls out of order, state round
trips mid-schedule."""

from __future__ import annotations

import random

import pytest

from tests.schedulers.test_base import WARMUPS, approx, hand_warmup, round_trip
from trainer_run import optimizers
from trainer_run.schedulers import (
    FactorScheduler,
    MultiFactorScheduler,
)


def hand_factor(n, *, step, factor=1.0, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                warmup_begin_lr=0.0, warmup_mode="linear", top=None):
    """FactorScheduler at update n when the largest update it has seen is ``top`` (>= n).

    The reductions happen at updates step+1, 2*step+1, ...: ``k = (top - 1) // step`` of
    them (none before update 1), each ``lr = max(lr * factor, stop_factor_lr)`` in turn.
    ``count`` starts at 0 whatever the warmup. Warmup calls do not reduce anything.
    """
    if n < warmup_steps:
        return hand_warmup(n, base_lr=base_lr, warmup_steps=warmup_steps,
                           warmup_begin_lr=warmup_begin_lr, warmup_mode=warmup_mode)
    top = n if top is None else top
    lr = base_lr
    for _ in range(max(0, (top - 1) // step)):
        lr = lr * factor
        if lr < stop_factor_lr:
            lr = stop_factor_lr
    return lr


def hand_multifactor(n, *, step, factor=1.0, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0.0,
                     warmup_mode="linear", top=None):
    """MultiFactorScheduler: one reduction for each listed update strictly below ``top``."""
    if n < warmup_steps:
        return hand_warmup(n, base_lr=base_lr, warmup_steps=warmup_steps,
                           warmup_begin_lr=warmup_begin_lr, warmup_mode=warmup_mode)
    top = n if top is None else top
    lr = base_lr
    for s in step:
        if top > s:
            lr *= factor
    return lr


class MXNetFactorLoop:
    """MXNet's FactorScheduler.__call__ transcribed line by line (the while loop)."""

    def __init__(self, step, factor, stop_factor_lr, base_lr):
        self.step, self.factor, self.stop, self.base_lr, self.count = (step, factor,
                                                                       stop_factor_lr, base_lr, 0)

    def __call__(self, num_update):
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop:
                self.base_lr = self.stop
        return self.base_lr


@pytest.mark.parametrize("warmup", WARMUPS)
@pytest.mark.parametrize("step, factor, stop_factor_lr", [
    (3, 0.5, 1e-8),
    (1, 0.9, 1e-8),
    (4, 0.1, 1e-4),      # reaches the floor
    (2, 1.0, 1e-8),      # MXNet's default factor: constant
    (5, 0.0, 0.002),     # straight to the floor
])
def test_factor_every_update(step, factor, stop_factor_lr, warmup):
    kw = dict(step=step, factor=factor, stop_factor_lr=stop_factor_lr, base_lr=0.1, **warmup)
    sched = FactorScheduler(**kw)
    for n in range(0, 40):
        assert sched(n) == approx(hand_factor(n, **kw)), n


def test_factor_values_spelled_out():
    sched = FactorScheduler(step=3, factor=0.5, base_lr=1.0)
    expected = [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125]
    assert [sched(n) for n in range(11)] == expected       # powers of two: exact


def test_factor_warmup_spelled_out():
    """The count starts at 0, not at warmup_steps: right after a 4-update warmup with step 3
    the rate has already been reduced once. The ramp rises to the construction base_lr."""
    linear = FactorScheduler(step=3, factor=0.5, base_lr=1.0, warmup_steps=4, warmup_begin_lr=0.2)
    assert [linear(n) for n in range(9)] == [approx(v) for v in
                                             (0.2, 0.4, 0.6, 0.8, 0.5, 0.5, 0.5, 0.25, 0.25)]
    constant = FactorScheduler(step=3, factor=0.5, base_lr=1.0, warmup_steps=4,
                               warmup_begin_lr=0.2, warmup_mode="constant")
    assert [constant(n) for n in range(9)] == [approx(v) for v in
                                               (0.2, 0.2, 0.2, 0.2, 0.5, 0.5, 0.5, 0.25, 0.25)]


def test_factor_stop_factor_lr_floor_spelled_out():
    sched = FactorScheduler(step=1, factor=0.1, stop_factor_lr=0.005, base_lr=1.0)
    values = [sched(n) for n in range(1, 8)]
    assert values == [approx(v) for v in (1.0, 0.1, 0.01, 0.005, 0.005, 0.005, 0.005)]
    assert sched.base_lr == 0.005


def test_factor_floor_lifts_a_base_lr_below_it():
    """MXNet's quirk: the floor is applied after each reduction, so a base_lr already below
    stop_factor_lr is raised to it at the first reduction."""
    sched = FactorScheduler(step=1, factor=0.5, stop_factor_lr=1e-8, base_lr=1e-9)
    assert sched(1) == 1e-9
    assert sched(2) == 1e-8
    assert sched(10) == 1e-8


def test_factor_jump_ahead_equals_sequential_calls():
    """A first call at a large update (continuing a training) applies every reduction on the
    way, with the same float operations as calling it update by update."""
    kw = dict(step=7, factor=0.93, stop_factor_lr=1e-8, base_lr=0.1)
    sequential = FactorScheduler(**kw)
    for n in range(0, 1001):
        sequential(n)
    jumped = FactorScheduler(**kw)
    assert jumped(1000) == sequential(1000) == approx(hand_factor(1000, **kw))
    assert jumped.count == sequential.count == (1000 - 1) // 7 * 7
    for n in (1000, 1001, 1006, 1007, 1008, 5000):
        assert jumped(n) == sequential(n)


@pytest.mark.parametrize("factor, stop_factor_lr", [(1.0, 1e-8), (0.5, 1e-3), (0.0, 0.0)])
def test_factor_huge_jump_matches_mxnet_loop(factor, stop_factor_lr):
    """At a fixed point (factor 1, or the floor reached) the loop only advances ``count``;
    the result equals MXNet's loop at every step, and a huge jump is still instant."""
    sched = FactorScheduler(step=3, factor=factor, stop_factor_lr=stop_factor_lr, base_lr=0.1)
    mx = MXNetFactorLoop(3, factor, stop_factor_lr, 0.1)
    for n in [0, 1, 2, 3, 4, 9, 10, 50, 51, 52, 53, 54, 55, 60, 200, 199, 5000, 5003]:
        assert sched(n) == mx(n), n
        assert sched.count == mx.count, n
    huge = 10**12
    assert sched(huge) == (0.1 if factor == 1.0 else stop_factor_lr)
    assert sched.count == (huge - 1) // 3 * 3


def test_factor_out_of_order_calls():
    """The schedule never goes back: an earlier update after a later one returns the current
    (reduced) rate, except inside the warmup, which is a pure function of the update."""
    kw = dict(step=2, factor=0.5, base_lr=1.0, warmup_steps=2, warmup_begin_lr=0.1)
    sched = FactorScheduler(**kw)
    assert sched(9) == hand_factor(9, **kw) == 0.0625     # (9 - 1) // 2 = 4 reductions
    assert sched(3) == 0.0625                              # not 0.5: no going back
    assert sched(2) == 0.0625
    assert sched(1) == approx(0.55)                        # warmup ramp to the original 1.0
    assert sched(0) == approx(0.1)
    assert sched(10) == 0.0625
    assert sched(11) == 0.03125
    top = 11
    for n in (4, 12, 7, 20, 1, 13, 21, 3):
        if n >= kw["warmup_steps"]:
            top = max(top, n)
        assert sched(n) == approx(hand_factor(n, **kw, top=top)), n


def test_factor_random_order_against_hand():
    kw = dict(step=3, factor=0.7, stop_factor_lr=0.01, base_lr=0.5, warmup_steps=3,
              warmup_begin_lr=0.05)
    rng = random.Random(0)
    sched, top = FactorScheduler(**kw), 0
    for _ in range(300):
        n = rng.randrange(0, 60)
        if n >= kw["warmup_steps"]:
            top = max(top, n)
        assert sched(n) == approx(hand_factor(n, **kw, top=max(top, n))), n


def test_factor_decays_from_overwritten_base_lr_and_ramps_to_original():
    """The optimizer writes its learning_rate into base_lr; the reductions start from it,
    while the warmup still rises to the construction base_lr (warmup_final_lr)."""
    sched = FactorScheduler(step=2, factor=0.5, base_lr=0.1, warmup_steps=2)
    opt = optimizers.create("sgd", learning_rate=0.4, lr_scheduler=sched)
    assert sched.base_lr == 0.4
    assert sched(1) == approx(0.05)
    assert sched(2) == 0.4 and sched(3) == 0.2 and sched(5) == 0.1
    opt.num_update = 6
    assert opt.learning_rate == 0.1
    opt.num_update = 1
    assert opt.learning_rate == approx(0.05)


def test_factor_with_begin_num_update():
    """Continuing a training with begin_num_update and a fresh scheduler: the first call
    jumps straight to the reduced rate (the reason MXNet uses a while loop)."""
    sched = FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    opt = optimizers.create("sgd", learning_rate=1.0, lr_scheduler=sched, begin_num_update=7)
    assert opt.learning_rate == 0.125                      # (7 - 1) // 2 = 3 reductions


def test_factor_state_round_trip_mid_schedule():
    kw = dict(step=3, factor=0.6, stop_factor_lr=0.004, base_lr=0.1, warmup_steps=2,
              warmup_begin_lr=0.01)
    sched = FactorScheduler(**kw)
    for n in range(0, 11):
        sched(n)
    state = round_trip(sched.state_dict())
    assert state == {"count": 9}                                 # progress only: 3 reductions
    restored = FactorScheduler(**kw)
    restored.load_state_dict(state)
    assert restored.base_lr == sched.base_lr                     # the same multiplications
    assert restored.state_dict() == sched.state_dict()
    for n in [5, 1, 11, 12, 13, 30, 14, 31, 60]:                 # incl. out of order and jumps
        assert restored(n) == sched(n), n
    assert restored.state_dict() == sched.state_dict()
    lowered = FactorScheduler(**{**kw, "base_lr": 0.05})         # a resume with another rate
    lowered.load_state_dict(state)
    assert lowered(11) == approx(0.05 * 0.6 ** 3)
    assert lowered(13) == approx(0.05 * 0.6 ** 4)


@pytest.mark.parametrize("warmup", WARMUPS)
@pytest.mark.parametrize("step, factor", [
    ([2, 5], 0.5),
    ([1], 0.1),
    ([3, 4, 10, 11], 0.7),
    ([6, 8], 1.0),
])
def test_multifactor_every_update(step, factor, warmup):
    kw = dict(step=step, factor=factor, base_lr=0.1, **warmup)
    sched = MultiFactorScheduler(**kw)
    for n in range(0, 20):
        assert sched(n) == approx(hand_multifactor(n, **kw)), n


def test_multifactor_values_spelled_out():
    sched = MultiFactorScheduler(step=[2, 5], factor=0.5, base_lr=1.0)
    assert [sched(n) for n in range(8)] == [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]
    assert (sched.cur_step_ind, sched.count) == (2, 5)


def test_multifactor_warmup_spelled_out():
    """Steps count from update 0: a step inside the warmup takes effect right after it."""
    sched = MultiFactorScheduler(step=[2, 6], factor=0.5, base_lr=1.0, warmup_steps=4,
                                 warmup_begin_lr=0.2)
    assert [sched(n) for n in range(9)] == [approx(v) for v in
                                            (0.2, 0.4, 0.6, 0.8, 0.5, 0.5, 0.5, 0.25, 0.25)]
    constant = MultiFactorScheduler(step=[2, 6], factor=0.5, base_lr=1.0, warmup_steps=4,
                                    warmup_begin_lr=0.2, warmup_mode="constant")
    assert [constant(n) for n in range(9)] == [approx(v) for v in
                                               (0.2, 0.2, 0.2, 0.2, 0.5, 0.5, 0.5, 0.25, 0.25)]


def test_multifactor_jump_and_out_of_order():
    kw = dict(step=[3, 5, 9], factor=0.5, base_lr=1.0, warmup_steps=2, warmup_begin_lr=0.0)
    sched = MultiFactorScheduler(**kw)
    assert sched(100) == 0.125                     # all three at once
    assert (sched.cur_step_ind, sched.count) == (3, 9)
    assert sched(4) == 0.125                       # no going back
    assert sched(1) == approx(0.5)                 # the warmup is a pure function of n
    sequential = MultiFactorScheduler(**kw)
    for n in range(0, 101):
        sequential(n)
    assert sequential.state_dict() == sched.state_dict()


def test_multifactor_accepts_a_tuple_and_a_single_step():
    assert MultiFactorScheduler(step=(2, 4), factor=0.5, base_lr=1.0)(5) == 0.25
    assert MultiFactorScheduler(step=[1], factor=0.5, base_lr=1.0)(2) == 0.5


def test_multifactor_state_round_trip_mid_schedule():
    kw = dict(step=[3, 6, 9, 12], factor=0.3, base_lr=0.1, warmup_steps=2, warmup_begin_lr=0.01)
    sched = MultiFactorScheduler(**kw)
    for n in range(0, 8):
        sched(n)
    state = round_trip(sched.state_dict())
    assert state == {"count": 6, "cur_step_ind": 2}
    restored = MultiFactorScheduler(**kw)
    restored.load_state_dict(state)
    assert restored.base_lr == sched.base_lr == approx(0.1 * 0.3 * 0.3)
    lowered = MultiFactorScheduler(**{**kw, "base_lr": 0.2})
    lowered.load_state_dict(state)
    assert lowered(8) == approx(0.2 * 0.3 * 0.3) and lowered(10) == approx(0.2 * 0.3 ** 3)
    for n in [8, 3, 9, 10, 1, 13, 20]:
        assert restored(n) == sched(n), n
    assert restored.state_dict() == sched.state_dict()
