"""Learning-rate schedulers against MXNet 1.9.1's formulas, written out by hand."""

from __future__ import annotations

import json
import math

import pytest

from trainer_run.errors import ConfigError
from trainer_run.schedulers import ConstantScheduler, CosineScheduler, create


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-15)


# -- hand references -----------------------------------------------------------------------

def hand_warmup(n, *, base_lr, warmup_steps, warmup_begin_lr, warmup_mode):
    """LRScheduler.get_warmup_lr: linear rise to base_lr, or constant warmup_begin_lr."""
    if warmup_mode == "linear":
        return warmup_begin_lr + (base_lr - warmup_begin_lr) * n / warmup_steps
    return warmup_begin_lr


def hand_constant(n, *, base_lr, warmup_steps=0, warmup_begin_lr=0.0, warmup_mode="linear"):
    if n < warmup_steps:
        return hand_warmup(n, base_lr=base_lr, warmup_steps=warmup_steps,
                           warmup_begin_lr=warmup_begin_lr, warmup_mode=warmup_mode)
    return base_lr


class HandCosine:
    """MXNet 1.9 CosineScheduler: past max_update it returns the last value it computed
    (its mutable ``base_lr``), which starts as the constructor's base_lr."""

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
            cosine = (1 + math.cos(math.pi * progress)) / 2
            self.last = self.final + (self.base - self.final) * cosine
        return self.last


# -- ConstantScheduler -------------------------------------------------------------------------

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


# -- CosineScheduler ---------------------------------------------------------------------------

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


# -- state ------------------------------------------------------------------------------------

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


# -- arguments ----------------------------------------------------------------------------------

@pytest.mark.parametrize("klass, kwargs", [
    (ConstantScheduler, dict(base_lr=0.1, warmup_begin_lr=0.2)),
    (ConstantScheduler, dict(base_lr=0.1, warmup_mode="exponential")),
    (ConstantScheduler, dict(base_lr=0.1, warmup_steps=-1)),
    (ConstantScheduler, dict(base_lr=-0.1)),
    (CosineScheduler, dict(max_update=10, base_lr=0.1, warmup_begin_lr=0.2)),
    (CosineScheduler, dict(max_update=10, warmup_mode="cubic")),
    (CosineScheduler, dict(max_update=0)),
    (CosineScheduler, dict(max_update=-5)),
    (CosineScheduler, dict(max_update=2.5)),
    (CosineScheduler, dict(max_update=5, warmup_steps=5)),
])
def test_invalid_arguments_raise_config_error(klass, kwargs):
    with pytest.raises(ConfigError):
        klass(**kwargs)


def test_registry():
    assert type(create("CosineScheduler", max_update=5)) is CosineScheduler
    assert type(create("constantscheduler")) is ConstantScheduler
    with pytest.raises(ConfigError, match="cosinescheduler"):
        create("nosuch")
