"""The MXNet list call (``updater(indices, grads, weights)``) equals one call per index, bit
for bit, also when its compiled kernels are collected and spread over threads."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_run import jit
from trainer_run.optimizers import create, get_updater

CASES = {"adam": {}, "sgd": {"momentum": 0.9}, "nadam": {}, "rmsprop": {"centered": True},
         "lamb": {}, "adagrad": {}, "signum": {}, "nag": {"momentum": 0.9},
         "dcasgd": {"momentum": 0.9}, "lars": {"momentum": 0.9}}


def _arrays(rng, dtype, shapes):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_list_call_spread_over_threads_equals_per_index_calls(name, dtype, monkeypatch):
    monkeypatch.setattr(jit, "PARALLEL_MIN", 1)           # every list call uses all cores
    rng = np.random.default_rng(3)
    shapes = [(7, 5), (33,), (2, 3, 4), (1,), (130,)]
    start = _arrays(rng, dtype, shapes)
    mp = dtype == np.float16
    listed = get_updater(create(name, multi_precision=mp, **CASES[name]))
    single = get_updater(create(name, multi_precision=mp, **CASES[name]))
    w_list = [w.copy() for w in start]
    w_single = [w.copy() for w in start]
    indices = [4, 0, 3, 1, 2]
    for _ in range(3):
        grads = _arrays(rng, dtype, shapes)
        listed(indices, [grads[i] for i in indices], [w_list[i] for i in indices])
        for i in indices:
            single(i, grads[i], w_single[i])
        for a, b in zip(w_list, w_single):
            assert np.array_equal(a, b)


def test_a_list_naming_one_index_twice_updates_it_twice_in_order(monkeypatch):
    monkeypatch.setattr(jit, "PARALLEL_MIN", 1)
    rng = np.random.default_rng(4)
    w_list, w_single = rng.standard_normal(50).astype(np.float32), None
    w_single = w_list.copy()
    g1, g2 = _arrays(rng, np.float32, [(50,), (50,)])
    listed, single = get_updater(create("adam")), get_updater(create("adam"))
    listed([0, 0], [g1, g2], [w_list, w_list])
    single(0, g1, w_single)
    single(0, g2, w_single)
    assert np.array_equal(w_list, w_single)
