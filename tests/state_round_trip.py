"""The one state round-trip harness of the optimizer tests: train six steps without a break,
and three steps, save (weights, updater states, optimizer state, its random generator), restore
into fresh objects, three more; the two must end bit-identical, weights and states. Its two
helpers, :func:`set_grads` and :func:`leaves`, serve the optimizer tests as well."""

from __future__ import annotations

import io
import json

import numpy as np

from trainer_run.optimizers import get_updater
from trainer_run.params import Parameter, ParamStore
from trainer_run.storage.checkpoint import flatten, unflatten


def through_disk(tree):
    """A state tree through JSON + .npz, as checkpoints store it."""
    arrays: dict = {}
    text = json.dumps(flatten(tree, arrays))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as npz:
        return unflatten(json.loads(text), {k: npz[k] for k in npz.files})


def leaves(state):
    """The arrays of an updater's state for one index (an array, a tuple of them, nested, or None)."""
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [x for s in state for x in leaves(s)]
    return [state]


def set_grads(store, grads):
    """Each parameter's gradient, in the store's order, set to ``grads[i]``."""
    for i, p in enumerate(store):
        p.grad[...] = grads[i]


def check_round_trip(make_optimizer, specs, init, grads, plain: bool):
    """Runs the round trip (see the module docstring) of the optimizer ``make_optimizer()`` builds
    on parameters ``specs`` (name, shape, lr_mult) starting from ``init`` (name -> array), with
    ``grads`` (one list per step, six steps); ``plain`` sends the saved state through JSON and
    .npz. Asserts the two trainings end equal; returns the saved state and the restored
    optimizer's ``num_update`` right after loading, for the caller's own checks."""
    def fresh(values):
        store = ParamStore({n: Parameter(values[n].copy(), name=n, lr_mult=m) for n, _, m in specs})
        opt = make_optimizer()
        updater = get_updater(opt)
        updater.attach(store)
        return store, opt, updater

    def train(store, updater, steps):
        for g in steps:
            set_grads(store, g)
            updater.step()

    store_a, _, u_a = fresh(init)
    train(store_a, u_a, grads)
    store_b, opt_b, u_b = fresh(init)
    train(store_b, u_b, grads[:3])
    saved = {"weights": store_b.state_dict(lambda a: a.copy()), "states": u_b.state_dict(lambda a: a),
             "optimizer": opt_b.state_dict()}
    if getattr(opt_b, "rng", None) is not None:
        saved["rng"] = opt_b.rng.bit_generator.state
    if plain:
        saved = through_disk(saved)
    store_c, opt_c, u_c = fresh(saved["weights"])
    u_c.load_state_dict(saved["states"], np.asarray)
    opt_c.load_state_dict(saved["optimizer"])
    loaded_num_update = opt_c.num_update
    if "rng" in saved:
        opt_c.rng.bit_generator.state = saved["rng"]   # a new generator, seeded from the state
    train(store_c, u_c, grads[3:])
    for pa, pc in zip(store_a, store_c):
        assert np.array_equal(pa.data, pc.data)
    for i in u_a.states:
        for a, c in zip(leaves(u_a.states[i]), leaves(u_c.states[i]), strict=True):
            assert np.array_equal(a, c)
    return saved, loaded_num_update
