"""SGLD (optimizers/sgld.py): deterministic given the seed, its mean update the gradient step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer_run.optimizers import create, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_sgld_is_deterministic_given_the_seed_and_its_mean_update_is_the_gradient_step():
    lr, n = 0.04, 200_000
    rng = np.random.default_rng(12)
    w0 = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)

    def one_step(seed):
        opt = create("sgld", learning_rate=lr, wd=0.1)
        opt.rng = np.random.default_rng(seed)
        w = w0.copy()
        get_updater(opt)(0, g, w)
        return w

    a, b, c = one_step(1), one_step(1), one_step(2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    noise = a.astype(np.float64) - (w0 - lr / 2 * (g + 0.1 * w0.astype(np.float64)))
    assert abs(noise.mean()) < 5 * math.sqrt(lr / n)
    assert noise.std() == pytest.approx(math.sqrt(lr), rel=0.01)

    opt = create("sgld")
    with pytest.raises(RuntimeError, match="rng"):
        get_updater(opt)(0, g, w0.copy())
