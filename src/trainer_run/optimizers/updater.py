"""MXNet's per-index updater, extended to flat parameter groups.

``get_updater(optimizer)`` returns an :class:`IndexUpdater`: called as
``updater(index, grad, weight)`` it creates the index's state on first use (through
``create_state_multi_precision``) and applies ``update_multi_precision`` in place, exactly
as MXNet's ``optimizer.Updater``. Called with lists of indices, gradients and weights it
updates each in turn.

:meth:`IndexUpdater.attach` binds a :class:`~trainer_run.params.ParamStore`: each group's
state is created once as flat buffers and every index's state is a view into them, so the
per-index path and the fused path (:meth:`IndexUpdater.step`) read and write the same
memory and may be mixed freely.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import numpy

from .. import jit
from ..storage.background_write import host_copy
from ..storage.states import check_state, flatten, map_state, state_leaves, unflatten
from .optimizer import Optimizer, index_key


def get_updater(optimizer: Optimizer) -> "IndexUpdater":
    """The per-index updater closure for ``optimizer`` (MXNet ``optimizer.get_updater``)."""
    return IndexUpdater(optimizer)


class IndexUpdater:
    """Keeps optimizer states per index and applies the optimizer to weights in place."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self._groups: list[tuple] = []
        self._flat: dict = {}

    def __call__(self, index, grad, weight) -> None:
        if isinstance(index, (list, tuple)):
            self._update_list(index, grad, weight)
            return
        if index not in self.states:
            self.states[index] = self.optimizer.create_state_multi_precision(index, weight)
        self.optimizer.update_multi_precision(index, weight, grad, self.states[index])

    def _update_list(self, indices, grads, weights) -> None:
        """The list form: each array through the optimizer's fused kernel where it has one
        (same numerics as the per-index update), else through ``update``. The bookkeeping
        runs in index order; with distinct indices the compiled kernels are collected and run
        together (:func:`.jit.batch`), spread over the cores when the list is large."""
        opt = self.optimizer
        fusable = opt.flat_state and opt.fused_step is not None
        together = len(set(indices)) == len(indices)
        with jit.batch() if together else contextlib.nullcontext():
            for index, grad, weight in zip(indices, grads, weights):
                if index not in self.states:
                    self.states[index] = opt.create_state_multi_precision(index, weight)
                flat = self._flat_state(index) if fusable else _NOT_FLAT
                if flat is not _NOT_FLAT and weight.flags.c_contiguous and grad.flags.c_contiguous:
                    opt.fused_update([index], weight.reshape(-1), grad.reshape(-1), flat)
                else:
                    opt.update_multi_precision(index, weight, grad, self.states[index])

    def _flat_state(self, index):
        """Index ``index``'s state as flat views, or ``_NOT_FLAT`` when a leaf is not
        C-contiguous (kept while the state is the same object)."""
        state = self.states[index]
        cached = self._flat.get(index)
        if cached is None or cached[0] is not state:
            flat = map_state(state, lambda a: a.reshape(-1)) if _contiguous(state) else _NOT_FLAT
            cached = self._flat[index] = (state, flat)
        return cached[1]

    # -- flat groups ----------------------------------------------------------------------
    def attach(self, store) -> None:
        """Creates flat states for every group of ``store`` and per-index views into them.

        The optimizer's ``param_dict`` is pointed at the store's parameters so that
        their ``lr_mult`` / ``wd_mult`` apply (as Gluon's Trainer does).
        """
        opt = self.optimizer
        opt.param_dict = store.param_dict()
        self._groups = []
        for group in store.groups:
            if not opt.flat_state:
                for index, p in zip(group.indices, group.params):
                    self.states[index] = opt.create_state_multi_precision(index, p.data)
                self._groups.append((group, None, False))
                continue
            flat = opt.create_state_multi_precision(group.indices[0], group.data)
            for k, index in enumerate(group.indices):
                self.states[index] = map_state(flat, lambda a, k=k: group.view(a, k))
            self._groups.append((group, flat, True))

    def step(self, scale: float = 1.0) -> None:
        """Applies one update to every attached parameter: one fused pass per group where
        the group's indices share update count and multipliers, per index otherwise. An
        order-sensitive optimizer with several groups is updated per index in index order.

        ``scale``: a factor the gradients carry (a loss scale); the step's gradient factor
        is then the optimizer's ``rescale_grad / scale``, passed to the optimizer with the
        step, so the unscaling happens in the optimizer's precision (MXNet's AMP)."""
        opt = self.optimizer
        rescale_grad = None if scale == 1.0 else opt.rescale_grad / scale
        if opt.order_sensitive and len(self._groups) > 1:
            members = sorted((i, p) for group, _, _ in self._groups
                             for i, p in zip(group.indices, group.params))
            for index, p in members:
                opt.update_multi_precision(index, p.data, p.grad, self.states[index], rescale_grad)
            return
        for entry in self._groups:
            self._step_group(entry, entry[0].data, entry[0].grad, rescale_grad)

    def step_group(self, k: int, data, grad) -> None:
        """Group ``k``'s part of :meth:`step` on ``data`` and ``grad``, flat arrays laid out
        like the group's buffers (a kvstore server's own), updated in place of them."""
        self._step_group(self._groups[k], data, grad)

    def _step_group(self, entry, data, grad, rescale_grad=None) -> None:
        group, flat, is_flat = entry
        opt = self.optimizer
        if is_flat and opt.can_fuse(group.indices):
            opt.fused_update(group.indices, data, grad, flat, group.slices, rescale_grad)
            return
        for k, index in enumerate(group.indices):
            opt.update_multi_precision(index, group.view(data, k), group.view(grad, k),
                                       self.states[index], rescale_grad)

    # -- state ------------------------------------------------------------------------------
    def state_dict(self, to_numpy) -> dict:
        """index -> list of host copies (read-only, see :func:`~trainer_run.background_write.host_copy`;
        None entries dropped) in the state's flattened order."""
        return {str(i): [host_copy(a, to_numpy) for a in state_leaves(s)] for i, s in self.states.items()}

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """All states as bytes in a safe format (an ``.npz`` archive with a JSON manifest; no
        pickle). With ``dump_optimizer`` the optimizer's hyper-parameters, counters and
        scheduler state are included, as MXNet's ``get_states(dump_optimizer=True)``."""
        arrays: dict = {}
        manifest = {"states": flatten({str(k): _plain(v) for k, v in self.states.items()}, arrays,
                                      "states")}
        if dump_optimizer:
            opt = self.optimizer
            manifest["optimizer"] = {"name": type(opt).__name__.lower(),
                                     "hyper": opt.hyper_parameters(),
                                     "state": flatten(opt.state_dict(), arrays, "optimizer")}
        buffer = io.BytesIO()
        numpy.savez(buffer, **{MANIFEST: numpy.frombuffer(json.dumps(manifest).encode(), numpy.uint8)},
                    **arrays)
        return buffer.getvalue()

    def set_states(self, blob: bytes, asarray=numpy.asarray) -> None:
        """Restores :meth:`get_states` output. States of indices that already exist (e.g.
        views of attached flat groups) are filled in place; others are created from the
        saved arrays (moved with ``asarray``)."""
        with numpy.load(io.BytesIO(blob), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        manifest = json.loads(arrays.pop(MANIFEST).tobytes().decode())
        for key, saved in unflatten(manifest["states"], arrays).items():
            index = index_key(key)
            if index in self.states:
                _copy_into(key, self.states[index], saved, asarray)
            else:
                self.states[index] = map_state(_tuples(saved), asarray)
        if "optimizer" in manifest:
            dumped = manifest["optimizer"]
            opt = self.optimizer
            if dumped["name"] != type(opt).__name__.lower():
                raise ValueError(f"the states hold a {dumped['name']} optimizer, not "
                                 f"{type(opt).__name__.lower()}")
            for name, value in dumped["hyper"].items():
                setattr(opt, name, value)
            opt.load_state_dict(unflatten(dumped["state"], arrays))

    def load_state_dict(self, arrays: dict, asarray) -> None:
        """Copies saved state arrays into the existing states (which must already exist)."""
        for key, saved in arrays.items():
            index = index_key(key)
            if index not in self.states:
                raise KeyError(f"no optimizer state for index {key}; attach the parameters first")
            _copy_into(key, self.states[index], saved, asarray)


class GroupUpdater:
    """``updater(key, grad, weight)`` over the flat groups of a
    :class:`~trainer_run.params.ParamStore`: key ``k`` is group ``k``, ``grad`` and ``weight``
    its flat gradient and weights (as a kvstore server holds them). ``weight`` takes the
    group's step in place, exactly as in :meth:`IndexUpdater.step` (the same fused pass,
    per-parameter multipliers and counts); the store only lays out the groups.

    This is what a ``dist_async`` server runs: the same numbers as a local update of the
    same group with the same gradient. An order-sensitive optimizer (Nadam, whose one
    ``m_schedule`` advances at every parameter's update) sees the parameters in the order the
    groups are pushed, group by group, rather than in index order across groups as
    :meth:`IndexUpdater.step` does. ``get_states`` / ``set_states`` are the
    :class:`IndexUpdater`'s (safe format).
    """

    def __init__(self, optimizer: Optimizer, store):
        self.optimizer = optimizer
        self.index_updater = get_updater(optimizer)
        self.index_updater.attach(store)

    def __call__(self, key, grad, weight) -> None:
        self.index_updater.step_group(key, weight.reshape(-1), grad.reshape(-1))

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        return self.index_updater.get_states(dump_optimizer)

    def set_states(self, blob: bytes) -> None:
        self.index_updater.set_states(blob)


MANIFEST = "__manifest__"
_NOT_FLAT = object()


def _copy_into(key, state, saved, asarray) -> None:
    """Copies saved arrays (a list, or a structure with the same leaves) into ``state``."""
    for dst, src in zip(*check_state(f"index {key}", state, saved)):
        dst[...] = asarray(src)


def _plain(state):
    """A state with host NumPy arrays (for serialising)."""
    return map_state(state, lambda a: a if isinstance(a, numpy.ndarray) else a.get())


def _tuples(state):
    """Saved lists back to the tuples optimizers create."""
    if isinstance(state, list):
        return tuple(_tuples(s) for s in state)
    return state


def _contiguous(*items) -> bool:
    return all(a.flags.c_contiguous for item in items for a in state_leaves(item))
