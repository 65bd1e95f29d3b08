"""Nadam (optimizers/nadam.py): one momentum schedule for all indices, as MXNet's ``Nadam``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.optimizers.test_optimizers_adaptive import lib_for, random_weights
from trainer_run.optimizers import get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_nadam_keeps_one_schedule_for_all_indices():
    rng = np.random.default_rng(8)
    weights = random_weights(rng)
    opt = lib_for("nadam")
    updater = get_updater(opt)
    expected, calls = 1.0, [(0, 1), (1, 1), (0, 2), (0, 3), (1, 2)]   # (index, its count)
    for index, t in calls:
        updater(index, rng.standard_normal(weights[index].shape).astype(np.float32),
                weights[index])
        expected *= 0.9 * (1 - 0.5 * 0.96 ** (t * 0.004))
    assert opt.m_schedule == pytest.approx(expected, rel=1e-15)
    assert opt.state_dict()["m_schedule"] == opt.m_schedule
