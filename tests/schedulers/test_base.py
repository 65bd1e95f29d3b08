"""The scheduler base, the constant schedule and the registry (schedulers/base.py), against MXNet
1.9.1's formulas written out by hand: warmup values, a state that holds no rate, creating by name."""

from __future__ import annotations

import json

import pytest

from trainer_run.errors import ConfigError
from trainer_run.schedulers import ConstantScheduler, CosineScheduler, create


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-15)


def round_trip(state: dict) -> dict:
    """What a checkpoint gives back: the state through JSON."""
    return json.loads(json.dumps(state, allow_nan=False))


def hand_warmup(n, *, base_lr, warmup_steps, warmup_begin_lr, warmup_mode):
    """LRScheduler.get_warmup_lr: linear rise to the construction base_lr, or constant
    warmup_begin_lr."""
    if warmup_mode == "linear":
        return warmup_begin_lr + (base_lr - warmup_begin_lr) * n / warmup_steps
    return warmup_begin_lr


WARMUPS = [
    dict(warmup_steps=0, warmup_begin_lr=0.0, warmup_mode="linear"),
    dict(warmup_steps=5, warmup_begin_lr=0.01, warmup_mode="linear"),
    dict(warmup_steps=5, warmup_begin_lr=0.01, warmup_mode="constant"),
    dict(warmup_steps=4, warmup_begin_lr=0.0, warmup_mode="linear"),
]
"""The warmups a decaying or step schedule is checked with at every update (test_decay.py,
test_steps.py)."""


def hand_constant(n, *, base_lr, warmup_steps=0, warmup_begin_lr=0.0, warmup_mode="linear"):
    if n < warmup_steps:
        return hand_warmup(n, base_lr=base_lr, warmup_steps=warmup_steps,
                           warmup_begin_lr=warmup_begin_lr, warmup_mode=warmup_mode)
    return base_lr


@pytest.mark.parametrize("warmup_mode", ["linear", "constant"])
@pytest.mark.parametrize("warmup_steps", [0, 1, 4])
def test_constant_scheduler(warmup_steps, warmup_mode):
    kw = dict(base_lr=0.1, warmup_steps=warmup_steps, warmup_begin_lr=0.02,
              warmup_mode=warmup_mode)
    sched = ConstantScheduler(**kw)
    for n in range(0, 15):
        assert sched(n) == approx(hand_constant(n, **kw)), n


def test_constant_scheduler_warmup_values_spelled_out():
    linear = ConstantScheduler(base_lr=0.1, warmup_steps=4, warmup_begin_lr=0.02)
    assert [linear(n) for n in range(6)] == [approx(v) for v in
                                             (0.02, 0.04, 0.06, 0.08, 0.1, 0.1)]
    constant = ConstantScheduler(base_lr=0.1, warmup_steps=4, warmup_begin_lr=0.02,
                                 warmup_mode="constant")
    assert [constant(n) for n in range(6)] == [approx(v) for v in
                                               (0.02, 0.02, 0.02, 0.02, 0.1, 0.1)]


def test_constant_state_holds_no_rate():
    """The rate is a parameter (the optimizer writes its learning_rate into base_lr when
    attached), not progress: a restored schedule uses the rate it was built with."""
    sched = ConstantScheduler(base_lr=0.1, warmup_steps=3, warmup_begin_lr=0.01)
    sched.base_lr = 0.3                      # as an optimizer attaching it would
    state = json.loads(json.dumps(sched.state_dict()))
    assert state == {}
    restored = ConstantScheduler(base_lr=0.1, warmup_steps=3, warmup_begin_lr=0.01)
    restored.base_lr = 0.3
    restored.load_state_dict(state)
    for n in range(0, 8):
        assert restored(n) == sched(n)
    lowered = ConstantScheduler(base_lr=0.1, warmup_steps=3, warmup_begin_lr=0.01)
    lowered.base_lr = 0.05                   # a resume with a lower learning rate
    lowered.load_state_dict(state)
    assert lowered(5) == 0.05


def test_registry():
    assert type(create("CosineScheduler", max_update=5)) is CosineScheduler
    assert type(create("constantscheduler")) is ConstantScheduler
    with pytest.raises(ConfigError, match="cosinescheduler"):
        create("nosuch")
