"""AdamW (optimizers/adamw.py): the update is skipped when ``rescale_grad`` is zero or not finite, as
MXNet's ``adamw_update``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainer_run.optimizers import create, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


@pytest.mark.parametrize("rescale", [0.0, math.inf, math.nan])
def test_adamw_skips_the_update_when_rescale_grad_is_zero_or_not_finite(rescale):
    w = np.ones(4, np.float32)
    opt = create("adamw", rescale_grad=rescale, wd=0.1)
    updater = get_updater(opt)
    updater(0, np.ones(4, np.float32), w)
    assert np.array_equal(w, np.ones(4, np.float32))
    assert all(np.array_equal(s, np.zeros(4, np.float32)) for s in updater.states[0])
    assert opt.num_update == 1
