"""Optimizer states saved and loaded: the one format, read and written here only.

An updater's states map each parameter index to the optimizer's state for it (None, an
array, or nested tuples of them, as ``create_state_multi_precision`` makes it). Saved, a
state is the list of its arrays in order (None dropped), on the host:
``{str(index): [array, ...]}``. A checkpoint holds that under its model's
``optimizer_states``; a states blob (``get_states``, a kvstore's
``save_optimizer_states``, a ``dist_async`` server's answer) holds it under ``states`` in an
``.npz`` archive with a JSON manifest, beside, with ``dump_optimizer``, the optimizer's name,
hyper-parameters and counters. Blobs are read with ``allow_pickle=False``.

Loading copies saved arrays into states the optimizer created for the same weights, once
every one has been checked (number of arrays and shapes; the optimizer's name when dumped):
a refused load writes nothing. The structure of a state always comes from the optimizer,
never from the file.
"""

from __future__ import annotations

import io
import json

import numpy

from ..backend import array_module
from ..storage.background_write import host_copy
from ..storage.states import check_state, flatten, state_leaves, unflatten

MANIFEST = "__manifest__"


def saved(states: dict, to_numpy=lambda a: a) -> dict:
    """``{str(index): [host array, ...]}`` of ``states`` (read-only host copies, see
    :func:`~trainer_run.storage.background_write.host_copy`, made with ``to_numpy``)."""
    return _by_index(states, lambda a: host_copy(a, to_numpy))


def _by_index(states: dict, convert) -> dict:
    """The saved form of ``states``, each array through ``convert``."""
    return {str(i): [convert(a) for a in state_leaves(s)] for i, s in states.items()}


def encode(states: dict, optimizer=None) -> bytes:
    """``states`` as a blob; with ``optimizer`` its name, hyper-parameters and counters too."""
    arrays: dict = {}
    manifest = {"states": flatten(_by_index(states, _to_host), arrays, "states")}  # written now: no copy
    if optimizer is not None:
        manifest["optimizer"] = {"name": type(optimizer).__name__.lower(),
                                 "hyper": optimizer.hyper_parameters(),
                                 "state": flatten(optimizer.state_dict(), arrays, "optimizer")}
    buffer = io.BytesIO()
    numpy.savez(buffer, **{MANIFEST: numpy.frombuffer(json.dumps(manifest).encode(), numpy.uint8)},
                **arrays)
    return buffer.getvalue()


def decode(blob: bytes) -> tuple[dict, dict | None]:
    """``(saved states, optimizer settings or None)`` of a blob :func:`encode` wrote."""
    with numpy.load(io.BytesIO(blob), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    manifest = json.loads(arrays.pop(MANIFEST).tobytes().decode())
    states = unflatten(manifest["states"], arrays)
    dumped = manifest.get("optimizer")
    if dumped is not None:
        dumped = {**dumped, "state": unflatten(dumped["state"], arrays)}
    return states, dumped


def check_optimizer(optimizer, dumped: dict | None) -> None:
    """ValueError unless settings dumped by :func:`encode` (None: none) are ``optimizer``'s kind."""
    if dumped is not None and dumped["name"] != type(optimizer).__name__.lower():
        raise ValueError(f"the states hold a {dumped['name']} optimizer, not "
                         f"{type(optimizer).__name__.lower()}")


def restore_optimizer(optimizer, dumped: dict | None) -> None:
    """Loads dumped settings (hyper-parameters, counters, schedule) into ``optimizer``."""
    if dumped is None:
        return
    check_optimizer(optimizer, dumped)
    for name, value in dumped["hyper"].items():
        setattr(optimizer, name, value)
    optimizer.load_state_dict(dumped["state"])


def checked(states: dict, loaded: dict, name=lambda index: f"index {index}") -> list:
    """``[(destination leaves, saved leaves), ...]`` for every loaded state (by index) whose
    index has a state in ``states``; ValueError (naming the state with ``name(index)``)
    before anything is written when one does not match."""
    return [check_state(name(index), states[index], state)
            for index, state in loaded.items() if index in states]


def copy_leaves(pairs, asarray=None) -> None:
    """Copies each saved leaf into its destination, moved with ``asarray`` (default: onto
    the destination's device)."""
    for dst, src in pairs:
        for d, s in zip(dst, src, strict=True):
            d[...] = (asarray or array_module(d).asarray)(s)


def _to_host(a):
    return a if isinstance(a, numpy.ndarray) else a.get()
