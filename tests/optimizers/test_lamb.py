"""LAMB (optimizers/lamb.py): the trust ratio's rules, against MXNet's ``lamb_update_phase2``."""

from __future__ import annotations

import numpy as np

from tests.optimizers.test_optimizers_layerwise import assert_close, ref_lamb
from trainer_run.optimizers import create, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_lamb_trust_ratio_rules():
    """r1 == 0 or r2 == 0 -> plain lr; bounds clip r1 only when truthy (MXNet passes them
    only then) and >= 0 (the kernel ignores negative ones)."""
    rng = np.random.default_rng(2)
    g = rng.standard_normal(6).astype(np.float32)
    big = 3 * rng.standard_normal(6).astype(np.float32)
    cases = [(np.zeros(6, np.float32), {}),                           # r1 = 0
             (np.zeros(6, np.float32), dict(lower_bound=2.0)),        # r1 raised from 0 to 2
             (big, dict(upper_bound=0.5)),                            # r1 lowered to 0.5
             (big, dict(lower_bound=100.0, upper_bound=200.0)),
             (big, dict(lower_bound=0, upper_bound=-1.0))]            # neither applies
    for w0, bounds in cases:
        w = w0.copy()
        get_updater(create("lamb", learning_rate=0.1, **bounds))(0, g, w)
        expected, _, _ = ref_lamb(w0.astype(np.float64), g.astype(np.float64), 0.0, 0.0, t=1,
                                  lr=0.1, wd=0.0, rescale=1.0, clip=None, beta1=0.9,
                                  beta2=0.999, epsilon=1e-6,
                                  **{k: v for k, v in bounds.items() if v and v > 0})
        assert_close(w, expected)
    # zero gradient -> r == 0 -> r2 == 0 -> the weight stays
    w = big.copy()
    get_updater(create("lamb"))(0, np.zeros(6, np.float32), w)
    assert np.array_equal(w, big)
