"""Adam (optimizers/adam.py) against MXNet 1.9.1's ``adam_update``: bias correction by each index's own
count, and a negative rate refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.optimizers.test_optimizers import (
    ADAM_KW,
    assert_close,
    hand_for,
    lib_for,
    random_grads,
    random_weights,
    ref_adam,
)
from trainer_run.errors import ConfigError
from trainer_run.optimizers import Adam, create, get_updater
from trainer_run.schedulers import CosineScheduler

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


@pytest.mark.parametrize("scheduled", [False, True])
def test_adam_bias_correction_uses_each_index_own_count(scheduled):
    rng = np.random.default_rng(5)
    weights = random_weights(rng)
    start1 = weights[1].copy()
    grads = random_grads(rng, steps=6)
    extra, hand_extra = {}, {}
    if scheduled:
        extra["lr_scheduler"] = CosineScheduler(max_update=8, base_lr=0.01, final_lr=0.001)
        hand_extra["schedule"] = lambda n: 0.001 + (0.01 - 0.001) * (1 + math.cos(
            math.pi * n / 8)) / 2
    opt = lib_for("adam", **extra)
    updater = get_updater(opt)
    hand = hand_for("adam", weights, **hand_extra)
    index1_steps = {2, 4, 5}
    for step, g in enumerate(grads, start=1):
        updater(0, g[0], weights[0])
        hand.step(0, g[0])
        if step in index1_steps:
            updater(1, g[1], weights[1])
            hand.step(1, g[1])
        assert opt.num_update == step            # the max over indices
        for i in (0, 1):
            assert_close(weights[i], hand.w[i])
    assert hand.counts == {0: 6, 1: 3}
    # sanity: the global count (num_update) as t would give a visibly different index 1
    shared = _adam_index1_with_global_t(start1, grads, index1_steps, hand_extra)
    assert not np.allclose(hand.w[1], shared, rtol=1e-4, atol=1e-6)


def _adam_index1_with_global_t(start, grads, index1_steps, hand_extra):
    """Index 1 updated with bias correction from num_update (the wrong rule)."""
    w = start.astype(np.float64)
    mean = np.zeros_like(w)
    var = np.zeros_like(w)
    schedule = hand_extra.get("schedule")
    for step, g in enumerate(grads, start=1):
        if step in index1_steps:
            lr = schedule(step) if schedule else ADAM_KW["learning_rate"]
            w, mean, var = ref_adam(w, g[1].astype(np.float64), mean, var, t=step, lr=lr,
                                    wd=ADAM_KW["wd"], rescale=ADAM_KW["rescale_grad"],
                                    clip=ADAM_KW["clip_gradient"], beta1=0.9, beta2=0.999,
                                    eps=1e-8)
    return w


def test_adam_negative_learning_rate_raises():
    with pytest.raises(ConfigError):
        Adam(learning_rate=-1e-3)
    with pytest.raises(ConfigError):
        create("adam", beta1=1.5)
