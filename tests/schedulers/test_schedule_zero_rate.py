"""Optimizers that divide by the learning rate (FTML, FTRL) refuse, in their constructor, a
schedule that can bring it to 0; each scheduler says what would (``zero_rate``)."""

from __future__ import annotations

import pytest

from trainer_run import optimizers, schedulers
from trainer_run.errors import ConfigError


@pytest.mark.parametrize("scheduler, cause", [
    (schedulers.CosineScheduler(max_update=10), ("final_lr", "the schedule ends at final_lr=0.0")),
    (schedulers.PolyScheduler(max_update=10, final_lr=0.0),
     ("final_lr", "the schedule ends at final_lr=0.0")),
    (schedulers.ConstantScheduler(warmup_steps=5, warmup_mode="constant"),
     ("warmup_begin_lr", "a constant warmup stays at warmup_begin_lr=0.0")),
    (schedulers.FactorScheduler(step=2, factor=0, stop_factor_lr=0),
     ("stop_factor_lr", "factor=0.0 brings it down to stop_factor_lr=0.0")),
    (schedulers.MultiFactorScheduler(step=[3], factor=0),
     ("factor", "every reduction multiplies it by factor=0.0")),
    (schedulers.ReduceOnPlateauScheduler(factor=0, min_lr=0),
     ("min_lr", "factor=0.0 brings it down to min_lr=0.0")),
])
def test_a_scheduler_names_what_brings_its_rate_to_zero(scheduler, cause):
    assert scheduler.zero_rate() == cause


@pytest.mark.parametrize("scheduler", [
    schedulers.ConstantScheduler(),
    schedulers.ConstantScheduler(warmup_steps=5),  # linear: above 0 from update 1
    schedulers.CosineScheduler(max_update=10, final_lr=1e-5),
    schedulers.FactorScheduler(step=2, factor=0),  # floored at stop_factor_lr=1e-8
    schedulers.MultiFactorScheduler(step=[3], factor=0.5),
    schedulers.ReduceOnPlateauScheduler(factor=0, min_lr=1e-6),
])
def test_a_schedule_that_stays_positive_has_no_zero_rate(scheduler):
    assert scheduler.zero_rate() is None
    optimizers.FTML(lr_scheduler=scheduler)


@pytest.mark.parametrize("name, why", [("FTML", "d_t divides by it"),
                                       ("Ftrl", "z and the weight divide by it")])
def test_optimizers_dividing_by_the_rate_refuse_a_schedule_reaching_zero(name, why):
    klass = getattr(optimizers, name)
    with pytest.raises(ConfigError) as info:
        klass(learning_rate=None, lr_scheduler=schedulers.CosineScheduler(max_update=10))
    assert str(info.value) == (f"learning_rate must stay > 0 ({why}), but the schedule ends at "
                               "final_lr=0.0: set scheduler.final_lr > 0")
    with pytest.raises(ConfigError, match=r"^learning_rate must be > 0, got 0\.0 "):
        klass(learning_rate=0.0, lr_scheduler=schedulers.ConstantScheduler())


def test_other_optimizers_take_a_schedule_reaching_zero():
    optimizers.SGD(learning_rate=None, lr_scheduler=schedulers.CosineScheduler(max_update=10))
