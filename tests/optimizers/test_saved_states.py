"""MXNet-style get_states / set_states in a safe format, and the list form of the updater."""

import io
import json
import zipfile

import numpy as np
import pytest

from trainer_run import optimizers
from trainer_run.params import Parameter, ParamStore
from trainer_run.schedulers import CosineScheduler


def _trajectory(rng, steps, shapes=((3, 4), (5,))):
    return [[rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(steps)]


@pytest.mark.parametrize("name, kwargs", [("adam", {"wd": 0.01}), ("sgd", {"momentum": 0.9})])
@pytest.mark.parametrize("dump_optimizer", [False, True])
def test_states_round_trip_mid_trajectory(name, kwargs, dump_optimizer):
    rng = np.random.default_rng(0)
    start = [rng.normal(size=s).astype(np.float32) for s in ((3, 4), (5,))]
    grads = _trajectory(rng, 6)

    def fresh():
        opt = optimizers.create(name, learning_rate=0.1,
                                lr_scheduler=CosineScheduler(max_update=10, base_lr=0.1), **kwargs)
        return optimizers.get_updater(opt), [w.copy() for w in start]

    straight, w_straight = fresh()
    for g in grads:
        straight([0, 1], g, w_straight)

    first, w = fresh()
    for g in grads[:3]:
        first([0, 1], g, w)
    blob = first.get_states(dump_optimizer=dump_optimizer)
    names = zipfile.ZipFile(io.BytesIO(blob)).namelist()
    assert all(n.endswith(".npy") for n in names)
    second, _ = fresh()
    second.set_states(blob)
    if not dump_optimizer:
        second.optimizer.load_state_dict(first.optimizer.state_dict())
    for g in grads[3:]:
        second([0, 1], g, w)
    for a, b in zip(w, w_straight):
        assert np.array_equal(a, b)
    assert second.optimizer.num_update == 6


def test_set_states_fills_attached_flat_views_in_place():
    rng = np.random.default_rng(1)
    params = {"a": Parameter(rng.normal(size=(2, 3)).astype(np.float32)),
              "b": Parameter(rng.normal(size=4).astype(np.float32))}
    store = ParamStore(params)
    source = optimizers.get_updater(optimizers.create("adam"))
    source.attach(store)
    for p in store:
        p.grad[...] = 1.0
    source.step()
    blob = source.get_states()
    target_store = ParamStore({k: Parameter(p.data.copy()) for k, p in params.items()})
    target = optimizers.get_updater(optimizers.create("adam"))
    target.attach(target_store)
    target.set_states(blob)
    group = target_store.groups[0]
    for index in (0, 1):
        mean, var = target.states[index]
        assert np.shares_memory(mean, target._groups[0][1][0])
        assert np.array_equal(mean, source.states[index][0]) and np.array_equal(var, source.states[index][1])
    assert group.size == 10


def test_set_states_refuses_another_optimizer():
    source = optimizers.get_updater(optimizers.create("sgd", momentum=0.9))
    source(0, np.ones(3, np.float32), np.zeros(3, np.float32))
    target = optimizers.get_updater(optimizers.create("adam"))
    with pytest.raises(ValueError, match="sgd"):
        target.set_states(source.get_states(dump_optimizer=True))


def test_list_form_takes_the_fused_path_and_matches_single_calls():
    rng = np.random.default_rng(2)
    start = [rng.normal(size=s).astype(np.float32) for s in ((3, 4), (5,), (2, 2, 2))]
    grads = _trajectory(rng, 4, shapes=((3, 4), (5,), (2, 2, 2)))
    listed = optimizers.get_updater(optimizers.create("adam", wd=0.1, clip_gradient=0.5))
    single = optimizers.get_updater(optimizers.create("adam", wd=0.1, clip_gradient=0.5))
    calls = []
    original = listed.optimizer.fused_update
    listed.optimizer.fused_update = lambda *a, **k: (calls.append(a[0]), original(*a, **k))
    w_list, w_single = [w.copy() for w in start], [w.copy() for w in start]
    for g in grads:
        listed([0, 1, 2], g, w_list)
        for i in range(3):
            single(i, g[i], w_single[i])
    assert len(calls) == 4 * 3
    for a, b in zip(w_list, w_single):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("name, kwargs", [("adam", {"wd": 0.01}), ("lamb", {"wd": 0.01}),
                                          ("sgd", {"momentum": 0.9, "wd": 0.1})])
def test_a_servers_group_updates_equal_the_local_step(name, kwargs):
    """What a dist_async server runs: key k = flat group k, weights and gradient as flat
    arrays of its own; three pushes of every group give the local fused step's bytes, with
    two groups (wd_mult 0 on the biases) and a layer-wise optimizer."""
    rng = np.random.default_rng(3)
    start = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4), "v": rng.normal(size=(4, 2))}

    def store():
        params = {k: Parameter(v.astype(np.float32), wd_mult=0.0 if k == "b" else 1.0)
                  for k, v in start.items()}
        return ParamStore(params)

    local, server = store(), store()
    assert len(local.groups) == 2
    updater = optimizers.get_updater(optimizers.create(name, learning_rate=0.1, **kwargs))
    updater.attach(local)
    group_updater = optimizers.GroupApplier(optimizers.create(name, learning_rate=0.1, **kwargs), server)
    weights = [g.data.copy() for g in local.groups]  # the server's own arrays
    for _ in range(3):
        grads = [rng.normal(size=g.size).astype(np.float32) for g in local.groups]
        for group, grad in zip(local.groups, grads):
            group.grad[...] = grad
        updater.step()
        for key, grad in enumerate(grads):
            group_updater(key, grad, weights[key])
    for group, w in zip(local.groups, weights):
        np.testing.assert_array_equal(w, group.data)
    assert group_updater.optimizer.num_update == updater.optimizer.num_update == 3


def test_a_refused_set_states_writes_nothing():
    """The optimizer's kind is checked before any state is copied: a blob dumped by Adam
    leaves an SGD updater's states as they were."""
    source = optimizers.get_updater(optimizers.create("adam"))
    source(0, np.ones(3, np.float32), np.zeros(3, np.float32))
    target = optimizers.get_updater(optimizers.create("sgd", momentum=0.9))
    target(0, np.full(3, 2.0, np.float32), np.zeros(3, np.float32))
    before = target.states[0].copy()
    with pytest.raises(ValueError, match="adam"):
        target.set_states(source.get_states(dump_optimizer=True))
    np.testing.assert_array_equal(target.states[0], before)


def test_states_saved_as_nested_trees_still_load():
    """Blobs written before the states were saved as flat lists of arrays held each state as
    its tree (``states/<index>/<i>`` per tuple member): they load into the same states."""
    rng = np.random.default_rng(3)
    mean, var = rng.normal(size=4).astype(np.float32), rng.random(4).astype(np.float32)
    manifest = {"states": {"0": [{"__array__": "states/0/0"}, {"__array__": "states/0/1"}]}}
    buffer = io.BytesIO()
    np.savez(buffer, __manifest__=np.frombuffer(json.dumps(manifest).encode(), np.uint8),
             **{"states/0/0": mean, "states/0/1": var})
    updater = optimizers.get_updater(optimizers.create("adam"))
    updater(0, np.zeros(4, np.float32), np.zeros(4, np.float32))
    updater.set_states(buffer.getvalue())
    np.testing.assert_array_equal(updater.states[0][0], mean)
    np.testing.assert_array_equal(updater.states[0][1], var)
