"""LARS (optimizers/lars.py) against MXNet's rules: the names it excludes and its weight-decay rule,
the momentum correction that follows the schedule, and the fused step with a schedule."""

from __future__ import annotations

import math

import numpy as np
from state_round_trip import set_grads

from tests.optimizers.test_optimizers_layerwise import (
    DEFAULT_SHAPES,
    MIXED,
    Hand,
    assert_close,
    lib,
    make_store,
    random_grads,
    random_weights,
)
from trainer_run.optimizers import create, get_updater
from trainer_run.schedulers import CosineScheduler

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_lars_names_exclusion_and_weight_decay_rule():
    """Names ending in gamma/beta/bias skip the layer-wise rate; LARS's own set_wd_mult
    zeroes wd for every name not ending in _weight (bn_gamma too, unlike the base rule)."""
    names = {0: "bn_gamma", 1: "conv_weight", 2: "fc_bias", 3: "x_beta"}
    shapes = [(4,), (3, 4), (4,), (2, 3)]
    rng = np.random.default_rng(3)
    weights = random_weights(rng, shapes)
    grads = random_grads(rng, shapes, steps=5)
    opt = lib("lars", param_idx2name=names)
    assert [opt._get_wd(i) for i in range(4)] == [0.0, 0.05, 0.0, 0.0]
    assert [opt._uses_lars(i) for i in range(4)] == [False, True, False, False]
    assert create("sgd", wd=0.05, param_idx2name=names)._get_wd(0) == 0.05   # base keeps _gamma
    updater = get_updater(opt)
    hand = Hand("lars", weights, names=names, wd_mult={0: 0.0, 2: 0.0, 3: 0.0})
    for g in grads:
        for i in g:
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
    for i in weights:
        assert_close(weights[i], hand.w[i])


def test_lars_momentum_correction_follows_the_schedule():
    rng = np.random.default_rng(4)
    weights = random_weights(rng, DEFAULT_SHAPES)
    grads = random_grads(rng, DEFAULT_SHAPES)
    opt = lib("lars", lr_scheduler=CosineScheduler(max_update=8, base_lr=0.5, final_lr=0.05))
    updater = get_updater(opt)
    hand = Hand("lars", weights,
                schedule=lambda n: 0.05 + 0.45 * (1 + math.cos(math.pi * n / 8)) / 2)
    for g in grads:
        for i in g:
            updater(i, g[i], weights[i])
            hand.step(i, g[i])
    for i in weights:
        assert_close(weights[i], hand.w[i])
    assert opt.cur_lr != opt.last_lr                 # the correction was really in play
    # and without it the trajectory differs
    plain = {i: w.astype(np.float32) for i, w in random_weights(np.random.default_rng(4),
                                                                DEFAULT_SHAPES).items()}
    u = get_updater(lib("lars", momentum_correction=False,
                        lr_scheduler=CosineScheduler(max_update=8, base_lr=0.5, final_lr=0.05)))
    for g in grads:
        for i in g:
            u(i, g[i], plain[i])
    assert not np.allclose(plain[0], weights[0], rtol=1e-4, atol=1e-6)


def test_lars_fused_step_with_a_schedule_equals_per_index_path():
    rng = np.random.default_rng(8)
    store, start = make_store(rng, MIXED)
    grads = random_grads(rng, [s for _, s, _ in MIXED], steps=6)

    def sched():
        return CosineScheduler(max_update=6, base_lr=0.5, final_lr=0.05)

    fused = get_updater(lib("lars", lr_scheduler=sched()))
    fused.attach(store)
    ref = get_updater(lib("lars", lr_scheduler=sched(), param_dict=store.param_dict()))
    ref_w = {i: w.copy() for i, w in start.items()}
    for g in grads:
        set_grads(store, g)
        fused.step()
        for i in ref_w:
            ref(i, g[i], ref_w[i])
    for i, p in enumerate(store):
        assert np.array_equal(p.data, ref_w[i])
