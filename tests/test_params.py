"""Flat parameter storage: grouping, views, and the gradient-staleness rule."""

import numpy as np

from trainer_run import functions as F
from trainer_run.params import Parameter, ParamStore


def _params():
    rng = np.random.default_rng(0)
    return {
        "a/W": Parameter(rng.normal(size=(3, 4)).astype(np.float32)),
        "a/b": Parameter(np.zeros(3, np.float32), wd_mult=0.0),
        "c/W": Parameter(rng.normal(size=(2, 3)).astype(np.float32)),
        "c/b": Parameter(np.zeros(2, np.float32), wd_mult=0.0),
        "d": Parameter(np.ones(5, np.float64)),
    }


def test_groups_share_dtype_and_multipliers_and_keep_model_order():
    params = _params()
    values = {k: p.data.copy() for k, p in params.items()}
    store = ParamStore(params)
    keys = [(g.dtype.str, g.wd_mult, g.indices) for g in store.groups]
    assert keys == [("<f4", 1.0, [0, 2]), ("<f4", 0.0, [1, 3]), ("<f8", 1.0, [4])]
    assert store.size == 12 + 3 + 6 + 2 + 5
    for name, p in params.items():
        np.testing.assert_array_equal(p.data, values[name])
    w = store.groups[0]
    assert np.shares_memory(params["a/W"].data, w.data) and np.shares_memory(params["c/W"].grad, w.grad)
    w.data[:] = 7
    assert (params["a/W"].data == 7).all() and (params["c/W"].data == 7).all()


def test_first_backward_overwrites_later_ones_add_unused_gradients_are_zeroed():
    params = _params()
    store = ParamStore(params)
    for p in store:
        p.grad[...] = 123.0
    store.cleargrads()
    x = np.ones((1, 4), np.float32)
    F.linear(x, params["a/W"], params["a/b"]).backward()
    store.finalize_grads()
    np.testing.assert_array_equal(params["a/W"].grad, np.ones((3, 4)))
    np.testing.assert_array_equal(params["a/b"].grad, np.ones(3))
    assert (params["c/W"].grad == 0).all() and (params["d"].grad == 0).all()
    F.linear(x, params["a/W"], params["a/b"]).backward()
    np.testing.assert_array_equal(params["a/W"].grad, 2 * np.ones((3, 4)))


def test_state_round_trip_copies_into_the_flat_views():
    store = ParamStore(_params())
    saved = store.state_dict(np.asarray)
    other = ParamStore(_params())
    for p in other:
        p.data[...] = 0
    other.load_state_dict(saved, np.asarray)
    for name in saved:
        np.testing.assert_array_equal(other.params[name].data, saved[name])
    assert all(np.shares_memory(p.data, g.data) for g in other.groups for p in g.params)


def test_a_frozen_parameter_is_in_no_group_gets_no_gradient_and_is_saved_and_loaded():
    params = _params()
    params["a/W"].requires_grad = False
    store = ParamStore(params)
    assert list(store.frozen) == ["a/W"]
    assert [g.indices for g in store.groups] == [[1, 3], [2], [4]]  # index 0 is in none
    assert store.size == 3 + 6 + 2 + 5
    store.cleargrads()
    F.linear(np.ones((1, 4), np.float32), params["a/W"], params["a/b"]).backward()
    store.finalize_grads()
    assert params["a/W"].grad is None  # linear never computed it
    np.testing.assert_array_equal(params["a/b"].grad, np.ones(3))
    saved = store.state_dict(np.asarray)
    assert "a/W" in saved
    other = _params()
    other["a/W"].requires_grad = False
    other_store = ParamStore(other)
    other_store.load_state_dict(saved, np.asarray)
    np.testing.assert_array_equal(other["a/W"].data, saved["a/W"])
    other["a/W"].data[...] = 7
    other_store.copy_frozen_from(store, np.asarray)
    np.testing.assert_array_equal(other["a/W"].data, params["a/W"].data)
