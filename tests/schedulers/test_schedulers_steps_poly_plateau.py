"""FactorScheduler, MultiFactorScheduler and PolyScheduler against MXNet 1.9.1's formulas
written out by hand; ReduceOnPlateauScheduler against PyTorch's ReduceLROnPlateau rules
simulated by hand; the PlateauStep extension that feeds it; the config files."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from trainer_run import optimizers
from trainer_run.compose.schema import option_section
from trainer_run.errors import ConfigError
from trainer_run.schedulers import (
    REGISTRY,
    FactorScheduler,
    MultiFactorScheduler,
    PolyScheduler,
    ReduceOnPlateauScheduler,
    create,
)
from trainer_run.training import AnyOf, IntervalTrigger, StopTrigger, Trainer
from trainer_run.training.extensions.plateau_step import PlateauStep
from trainer_run.training.trainer import PRIORITY_EDITOR, PRIORITY_READER, PRIORITY_WRITER

CONFIGS = Path(__file__).resolve().parent.parent.parent / "configs" / "scheduler"


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-15)


def round_trip(state: dict) -> dict:
    """What a checkpoint gives back: the state through JSON."""
    return json.loads(json.dumps(state, allow_nan=False))


# -- hand references (MXNet 1.9.1 lr_scheduler.py, read off the source) ------------------------

def hand_warmup(n, *, base_lr, warmup_steps, warmup_begin_lr, warmup_mode):
    """LRScheduler.get_warmup_lr: linear rise to the construction base_lr, or constant."""
    if warmup_mode == "linear":
        return warmup_begin_lr + (base_lr - warmup_begin_lr) * n / warmup_steps
    return warmup_begin_lr


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


class HandPoly:
    """PolyScheduler: past max_update it returns the last value it computed."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0.0, warmup_steps=0,
                 warmup_begin_lr=0.0, warmup_mode="linear"):
        self.max_update, self.base, self.pwr, self.final = max_update, base_lr, pwr, final_lr
        self.warmup = dict(base_lr=base_lr, warmup_steps=warmup_steps,
                           warmup_begin_lr=warmup_begin_lr, warmup_mode=warmup_mode)
        self.warmup_steps = warmup_steps
        self.last = base_lr

    def __call__(self, n):
        if n < self.warmup_steps:
            return hand_warmup(n, **self.warmup)
        if n <= self.max_update:
            progress = (n - self.warmup_steps) / (self.max_update - self.warmup_steps)
            self.last = self.final + (self.base - self.final) * (1 - progress) ** self.pwr
        return self.last


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


WARMUPS = [
    dict(warmup_steps=0, warmup_begin_lr=0.0, warmup_mode="linear"),
    dict(warmup_steps=5, warmup_begin_lr=0.01, warmup_mode="linear"),
    dict(warmup_steps=5, warmup_begin_lr=0.01, warmup_mode="constant"),
    dict(warmup_steps=4, warmup_begin_lr=0.0, warmup_mode="linear"),
]


# -- FactorScheduler ----------------------------------------------------------------------------

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


# -- MultiFactorScheduler -----------------------------------------------------------------------

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


# -- PolyScheduler --------------------------------------------------------------------------------

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


# -- invalid arguments ------------------------------------------------------------------------------

@pytest.mark.parametrize("klass, kwargs, starts", [
    (FactorScheduler, dict(step=0), "step"),
    (FactorScheduler, dict(step=-3), "step"),
    (FactorScheduler, dict(step=2.5), "step"),
    (FactorScheduler, dict(step="10"), "step"),
    (FactorScheduler, dict(step=True), "step"),
    (FactorScheduler, dict(step=10, factor=1.5), "factor"),
    (FactorScheduler, dict(step=10, factor=-0.1), "factor"),
    (FactorScheduler, dict(step=10, stop_factor_lr=-1e-8), "stop_factor_lr"),
    (FactorScheduler, dict(step=10, base_lr=0.1, warmup_begin_lr=0.2), "warmup_begin_lr"),
    (FactorScheduler, dict(step=10, warmup_mode="cubic"), "warmup_mode"),
    (FactorScheduler, dict(step=10, warmup_steps=-1), "warmup_steps"),
    (MultiFactorScheduler, dict(step=[]), "step"),
    (MultiFactorScheduler, dict(step=5), "step"),
    (MultiFactorScheduler, dict(step="5"), "step"),
    (MultiFactorScheduler, dict(step=[3, 3]), "step"),
    (MultiFactorScheduler, dict(step=[5, 2]), "step"),
    (MultiFactorScheduler, dict(step=[0, 4]), "step[0]"),
    (MultiFactorScheduler, dict(step=[2, 4.5]), "step[1]"),
    (MultiFactorScheduler, dict(step=[2, 4], factor=2), "factor"),
    (MultiFactorScheduler, dict(step=[2, 4], warmup_mode="exp"), "warmup_mode"),
    (PolyScheduler, dict(max_update=0), "max_update"),
    (PolyScheduler, dict(max_update=2.5), "max_update"),
    (PolyScheduler, dict(max_update=None), "max_update"),
    (PolyScheduler, dict(max_update=3, warmup_steps=3), "max_update"),
    (PolyScheduler, dict(max_update=10, pwr=-1), "pwr"),
    (PolyScheduler, dict(max_update=10, pwr="2"), "pwr"),
    (PolyScheduler, dict(max_update=10, final_lr=-0.1), "final_lr"),
    (PolyScheduler, dict(max_update=10, base_lr=-0.1), "base_lr"),
    (ReduceOnPlateauScheduler, dict(mode="avg"), "mode"),
    (ReduceOnPlateauScheduler, dict(factor=1.0), "factor"),
    (ReduceOnPlateauScheduler, dict(factor=1.5), "factor"),
    (ReduceOnPlateauScheduler, dict(factor=-0.1), "factor"),
    (ReduceOnPlateauScheduler, dict(patience=-1), "patience"),
    (ReduceOnPlateauScheduler, dict(patience=1.5), "patience"),
    (ReduceOnPlateauScheduler, dict(threshold=-1e-4), "threshold"),
    (ReduceOnPlateauScheduler, dict(threshold_mode="pct"), "threshold_mode"),
    (ReduceOnPlateauScheduler, dict(cooldown=-1), "cooldown"),
    (ReduceOnPlateauScheduler, dict(min_lr=-1.0), "min_lr"),
    (ReduceOnPlateauScheduler, dict(eps=-1.0), "eps"),
    (ReduceOnPlateauScheduler, dict(monitor=""), "monitor"),
    (ReduceOnPlateauScheduler, dict(monitor=None), "monitor"),
    (ReduceOnPlateauScheduler, dict(base_lr=0.1, warmup_begin_lr=0.5), "warmup_begin_lr"),
])
def test_invalid_arguments_raise_config_error(klass, kwargs, starts):
    with pytest.raises(ConfigError) as info:
        klass(**kwargs)
    assert str(info.value).startswith(starts), str(info.value)


def test_registry_and_create():
    for name, klass in [("factorscheduler", FactorScheduler),
                        ("MultiFactorScheduler", MultiFactorScheduler),
                        ("polyscheduler", PolyScheduler),
                        ("ReduceOnPlateauScheduler", ReduceOnPlateauScheduler)]:
        assert REGISTRY[name.lower()] is klass
    assert type(create("PolyScheduler", max_update=5)) is PolyScheduler
    assert type(create("FactorScheduler", step=5)) is FactorScheduler


# -- config files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("file, klass", [
    ("factor.yaml", FactorScheduler),
    ("multifactor.yaml", MultiFactorScheduler),
    ("poly.yaml", PolyScheduler),
    ("plateau.yaml", ReduceOnPlateauScheduler),
])
def test_config_files_build(file, klass):
    """Every key is an argument; the values are the constructor's defaults apart from the
    ones without one (step, max_update) and base_lr; the command line builds it."""
    from trainer_run.assembly.build import build_scheduler

    text = (CONFIGS / file).read_text()
    assert text.startswith("# ")
    section = OmegaConf.to_container(OmegaConf.create(
        {"optimizer": {"learning_rate": 0.05}, "scheduler": option_section("scheduler", file[:-5])}),
        resolve=True)["scheduler"]
    assert section["_target_"] == f"trainer_run.schedulers.{klass.__name__}"
    sched = build_scheduler(section, total_iterations=1000)
    assert type(sched) is klass and sched.base_lr == 0.05
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(klass).parameters.items()
                if p.default is not inspect.Parameter.empty}
    for key, value in section.items():
        if key in ("_target_", "base_lr", "step", "max_update"):
            continue
        assert value == defaults[key], key
    if klass is PolyScheduler:
        assert sched.max_update == 1000


def test_config_error_is_prefixed_by_the_section():
    from trainer_run.assembly.build import build_scheduler

    with pytest.raises(ConfigError, match=r"^scheduler\.step must be >= 1"):
        build_scheduler({"_target_": "trainer_run.schedulers.FactorScheduler", "step": 0}, 100)
    with pytest.raises(ConfigError, match=r"^scheduler\.patience must be an integer"):
        build_scheduler({"_target_": "trainer_run.schedulers.ReduceOnPlateauScheduler",
                         "patience": 2.5}, 100)


# -- ReduceOnPlateauScheduler ----------------------------------------------------------------------

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


# -- PlateauStep -----------------------------------------------------------------------------------

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
