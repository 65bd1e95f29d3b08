"""LBSGD (optimizers/lbsgd.py) against MXNet 1.9.1's rules, by hand: its warmup strategies, the steps
between macro-batches, the rate read before counting, the copy of the first gradient, and its
refused arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.optimizers.test_optimizers_sgd_family import (
    SHAPES,
    Hand,
    lib,
    random_grads,
    random_weights,
    run_per_index,
)
from trainer_run.errors import ConfigError
from trainer_run.optimizers import create, get_updater
from trainer_run.schedulers import CosineScheduler

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


@pytest.mark.parametrize("strategy", ["linear", "power2", "sqrt"])
def test_lbsgd_warmup_strategies(strategy):
    rng = np.random.default_rng(2)
    weights = random_weights(rng)
    # nwup = 6: macro-batches at num_cums 2, 4 (warming up), 6, 8 (full batch_scale)
    extra = dict(warmup_strategy=strategy, batch_scale=2, warmup_epochs=2, updates_per_epoch=3)
    run_per_index(lib("lbsgd", **extra), weights, random_grads(rng),
                  Hand("lbsgd", weights, **extra))


def test_lbsgd_steps_between_macro_batches_leave_weight_and_momentum_alone():
    rng = np.random.default_rng(9)
    weights = random_weights(rng)
    start = {i: w.copy() for i, w in weights.items()}
    updater = get_updater(lib("lbsgd", batch_scale=3))
    for step, g in enumerate(random_grads(rng, steps=3), start=1):
        for i in weights:
            updater(i, g[i], weights[i])
            changed = not np.array_equal(weights[i], start[i])
            assert changed == (step == 3)
            assert np.any(updater.states[i]) == (step == 3)


def test_lbsgd_reads_the_learning_rate_before_counting():
    """With a scheduler, index 0's k-th update sees num_update k - 1 (index 1's sees k)."""
    rng = np.random.default_rng(10)
    weights = random_weights(rng)

    def schedule(n):
        return 0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * min(n, 6) / 6)) / 2

    opt = lib("lbsgd", lr_scheduler=CosineScheduler(max_update=6, base_lr=0.1, final_lr=0.01))
    run_per_index(opt, weights, random_grads(rng), Hand("lbsgd", weights, schedule=schedule))


def test_lbsgd_accumulates_a_copy_of_the_first_gradient():
    """MXNet keeps a reference to it; a reused gradient buffer must not change the sum."""
    rng = np.random.default_rng(11)
    start = random_weights(rng)
    grads = random_grads(rng, steps=4)
    fresh = {i: w.copy() for i, w in start.items()}
    run_per_index(lib("lbsgd"), fresh, grads)
    reused = {i: w.copy() for i, w in start.items()}
    buffers = {i: np.empty(s, np.float32) for i, s in enumerate(SHAPES)}
    updater = get_updater(lib("lbsgd"))
    for g in grads:
        for i in reused:
            buffers[i][...] = g[i]
            updater(i, buffers[i], reused[i])
    for i in start:
        assert np.array_equal(fresh[i], reused[i])


@pytest.mark.parametrize("kwargs", [dict(warmup_strategy="cosine"), dict(batch_scale=0),
                                    dict(batch_scale=1.5), dict(updates_per_epoch=-1)])
def test_lbsgd_bad_arguments(kwargs):
    with pytest.raises(ConfigError, match=f"^{next(iter(kwargs))}"):
        create("lbsgd", **kwargs)
