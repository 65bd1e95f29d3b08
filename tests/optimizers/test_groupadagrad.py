"""GroupAdaGrad (optimizers/groupadagrad.py) against MXNet's rules: clipping at zero, 1-D or 2-D
weights without weight decay, a bias as a column, and the attached per-index updates."""

from __future__ import annotations

import numpy as np
import pytest
from state_round_trip import set_grads

from tests.optimizers.test_optimizers_layerwise import Hand, assert_close, lib, make_store, random_grads
from trainer_run.errors import ConfigError
from trainer_run.optimizers import create, get_updater

JIT_AND_NUMPY = True  # each test runs with the compiled loops and with NumPy's (conftest.py)


def test_groupadagrad_clip_zero_still_clips_and_needs_1d_or_2d_weights_without_wd():
    w = np.ones((2, 3), np.float32)
    updater = get_updater(create("groupadagrad", clip_gradient=0.0))
    updater(0, np.full((2, 3), 5.0, np.float32), w)            # clipped to 0: nothing moves
    assert np.array_equal(w, np.ones((2, 3), np.float32))
    assert np.array_equal(updater.states[0], np.zeros((2, 1), np.float32))
    assert updater.states[0].dtype == np.float32
    with pytest.raises(ConfigError, match="2-D"):
        get_updater(create("groupadagrad"))(0, np.ones((2, 2, 2), np.float32),
                                            np.ones((2, 2, 2), np.float32))
    with pytest.raises(ConfigError, match="^wd"):
        create("groupadagrad", wd=0.01)


def test_groupadagrad_takes_a_bias_as_a_column_one_history_per_element():
    rng = np.random.default_rng(3)
    bias, column = rng.normal(size=4).astype(np.float32), None
    column = bias.reshape(4, 1).copy()
    as_vector, as_column = get_updater(create("groupadagrad")), get_updater(create("groupadagrad"))
    for _ in range(3):
        g = rng.normal(size=4).astype(np.float32)
        as_vector(0, g, bias)
        as_column(0, g.reshape(4, 1), column)
    assert np.array_equal(bias, column.ravel())
    assert as_vector.states[0].shape == (4, 1)


def test_groupadagrad_attached_updates_per_index():
    rng = np.random.default_rng(9)
    specs = [("a", (3, 4), 1.0), ("b", (5, 2), 1.0)]
    store, start = make_store(rng, specs)
    grads = random_grads(rng, [s for _, s, _ in specs], steps=5)
    opt = lib("groupadagrad")
    assert opt.flat_state is False and opt.fused_step is None
    updater = get_updater(opt)
    updater.attach(store)
    hand = Hand("groupadagrad", start)
    for g in grads:
        set_grads(store, g)
        updater.step()
        for i in g:
            hand.step(i, g[i])
    for i, p in enumerate(store):
        assert_close(p.data, hand.w[i])
        assert updater.states[i].shape == (p.data.shape[0], 1)
