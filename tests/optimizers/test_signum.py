"""Signum and signSGD (optimizers/signum.py): signSGD ignores rescaling and clipping and refuses
``wd_lh``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.optimizers.test_optimizers_sgd_family import lib, random_grads, random_weights, run_per_index
from trainer_run.errors import ConfigError
from trainer_run.optimizers import create

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_signsgd_ignores_rescale_and_clipping_and_refuses_wd_lh():
    rng = np.random.default_rng(4)
    start = random_weights(rng)
    grads = random_grads(rng)
    results = []
    for extra in ({}, dict(rescale_grad=3.0, clip_gradient=None), dict(clip_gradient=0.01)):
        weights = {i: w.copy() for i, w in start.items()}
        run_per_index(lib("signsgd", **extra), weights, grads)
        results.append(weights)
    for other in results[1:]:
        for i in start:
            assert np.array_equal(other[i], results[0][i])
    with pytest.raises(ConfigError, match="^wd_lh"):
        create("signum", momentum=0.0, wd_lh=0.1)
