"""MXNet's ``Test`` optimizer (optimizers/mxtest.py): it counts no update, on either path."""

from __future__ import annotations

import numpy as np

from tests.optimizers.test_optimizers_sgd_family import UNIFORM, make_store
from trainer_run.optimizers import create, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_test_optimizer_does_not_count_updates_on_either_path():
    rng = np.random.default_rng(13)
    store, start = make_store(rng, UNIFORM[:2], np.float64)
    u = get_updater(create("test", rescale_grad=0.5))
    u.attach(store)
    for p in store:
        p.grad[...] = 2.0
    u.step()                                              # fused: weight += 0.5 * 2
    for i, p in enumerate(store):
        assert np.array_equal(p.data, start[i] + 1.0)
        assert u.states[i].dtype == np.float32                # MXNet's zeros(shape) default
        assert np.array_equal(u.states[i], p.data.astype(np.float32))
    first = store.params["a"]
    u(0, first.grad, first.data)                          # per index
    assert np.array_equal(first.data, start[0] + 2.0)
    assert u.optimizer.num_update == 0 and u.optimizer.state_dict()["index_update_count"] == {}
