"""State trees: how every stateful object's state is held, compared and stored.

A state tree is plain data (dicts, lists, tuples, scalars, strings, None) with arrays as
leaves. :func:`flatten` turns one into JSON-able data plus a dict of its arrays by path, and
:func:`unflatten` back (checkpoints and saved optimizer states are written that way), and
:func:`unstorable` finds what a tree holds that a checkpoint cannot;
:func:`map_state` and :func:`state_leaves` walk an optimizer state (None, an array, or
nested tuples and lists of them), and :func:`check_state` compares a saved one with a live one.
"""

from __future__ import annotations

import numpy


def flatten(tree, arrays: dict, path: str = ""):
    """The JSON-able tree with arrays moved into ``arrays`` under their path."""
    if isinstance(tree, dict):
        return {str(k): flatten(v, arrays, f"{path}/{k}") for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [flatten(v, arrays, f"{path}/{i}") for i, v in enumerate(tree)]
    if isinstance(tree, numpy.ndarray):
        key = path.lstrip("/")
        arrays[key] = tree
        return {"__array__": key}
    if isinstance(tree, numpy.generic):
        return tree.item()
    return tree


STORABLE = (str, int, float, bool, type(None))
"""The plain values a state tree may hold (with dicts, lists, tuples and arrays)."""


def unstorable(tree, path: str = "") -> str | None:
    """Where ``tree`` holds a value a checkpoint cannot store, and of what type (``/a/0 (a
    value of type set)``), or None when it holds none: values must be :data:`STORABLE`, NumPy scalars of
    those, or NumPy arrays of numbers, booleans or text (not of Python objects)."""
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        value = tree.item() if isinstance(tree, numpy.generic) else tree
        if isinstance(value, STORABLE) or isinstance(tree, numpy.ndarray) and not tree.dtype.hasobject:
            return None
        kind = "an array of Python objects" if isinstance(tree, numpy.ndarray) else \
            f"a value of type {type(tree).__name__}"
        return f"{path or '/'} ({kind})"
    for key, value in items:
        found = unstorable(value, f"{path}/{key}")
        if found is not None:
            return found
    return None


def unflatten(tree, arrays):
    """Inverse of :func:`flatten`."""
    if isinstance(tree, dict):
        if set(tree) == {"__array__"}:
            return arrays[tree["__array__"]]
        return {k: unflatten(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [unflatten(v, arrays) for v in tree]
    return tree


def check_state(name: str, state, saved) -> tuple[list, list]:
    """The leaves of ``state`` and ``saved``; ValueError naming the optimizer state of
    ``name`` unless they have the same number of arrays and the same shapes."""
    leaves, saved = state_leaves(state), state_leaves(saved)
    if len(leaves) != len(saved):
        raise ValueError(f"optimizer state for {name} has {len(saved)} arrays, "
                         f"expected {len(leaves)}")
    for dst, src in zip(leaves, saved):
        if tuple(dst.shape) != tuple(src.shape):
            raise ValueError(f"optimizer state for {name} has shape "
                             f"{tuple(src.shape)}, expected {tuple(dst.shape)}")
    return leaves, saved


def map_state(state, fn):
    """``state`` (None, an array, or nested tuples/lists of them) with ``fn`` applied to each array."""
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return type(state)(map_state(s, fn) for s in state)
    return fn(state)


def state_leaves(state) -> list:
    """The arrays of ``state`` in order (None: none)."""
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [leaf for s in state for leaf in state_leaves(s)]
    return [state]
