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

from typing import Any

import numpy

from .optimizer import Optimizer


def get_updater(optimizer: Optimizer) -> "IndexUpdater":
    """The per-index updater closure for ``optimizer`` (MXNet ``optimizer.get_updater``)."""
    return IndexUpdater(optimizer)


class IndexUpdater:
    """Keeps optimizer states per index and applies the optimizer to weights in place."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self._groups: list[tuple] = []

    def __call__(self, index, grad, weight) -> None:
        if isinstance(index, (list, tuple)):
            self._update_list(index, grad, weight)
            return
        if index not in self.states:
            self.states[index] = self.optimizer.create_state_multi_precision(index, weight)
        self.optimizer.update_multi_precision(index, weight, grad, self.states[index])

    def _update_list(self, indices, grads, weights) -> None:
        """The list form: each array through the optimizer's fused kernel where it has one
        (same numerics as the per-index update), else through ``update``."""
        opt = self.optimizer
        for index, grad, weight in zip(indices, grads, weights):
            if index not in self.states:
                self.states[index] = opt.create_state_multi_precision(index, weight)
            state = self.states[index]
            if opt.flat_state and opt.can_fuse([index]) and _contiguous(weight, grad, state):
                flat = _map_state(state, lambda a: a.reshape(-1))
                opt.fused_update([index], weight.reshape(-1), grad.reshape(-1), flat)
            else:
                opt.update_multi_precision(index, weight, grad, state)

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
                self.states[index] = _map_state(flat, lambda a, k=k: group.view(a, k))
            self._groups.append((group, flat, True))

    def step(self) -> None:
        """Applies one update to every attached parameter: one fused pass per group where
        the group's indices share update count and multipliers, per index otherwise."""
        opt = self.optimizer
        for group, flat, is_flat in self._groups:
            if is_flat and opt.can_fuse(group.indices):
                opt.fused_update(group.indices, group.data, group.grad, flat, group.slices)
            else:
                for k, index in enumerate(group.indices):
                    opt.update_multi_precision(index, group.params[k].data,
                                               group.params[k].grad, self.states[index])

    # -- state ------------------------------------------------------------------------------
    def state_dict(self, to_numpy) -> dict:
        """index -> list of host arrays (None entries dropped) in the state's flattened order."""
        return {str(i): [numpy.array(to_numpy(a)) for a in _leaves(s)] for i, s in self.states.items()}

    def load_state_dict(self, arrays: dict, asarray) -> None:
        """Copies saved state arrays into the existing states (which must already exist)."""
        for key, saved in arrays.items():
            index = int(key) if key.lstrip("-").isdigit() else key
            if index not in self.states:
                raise KeyError(f"no optimizer state for index {key}; attach the parameters first")
            leaves = _leaves(self.states[index])
            if len(leaves) != len(saved):
                raise ValueError(f"optimizer state for index {key} has {len(saved)} arrays, "
                                 f"expected {len(leaves)}")
            for dst, src in zip(leaves, saved):
                if tuple(dst.shape) != tuple(src.shape):
                    raise ValueError(f"optimizer state for index {key} has shape "
                                     f"{tuple(src.shape)}, expected {tuple(dst.shape)}")
                dst[...] = asarray(src)


def _contiguous(*items) -> bool:
    return all(a.flags.c_contiguous for item in items for a in _leaves(item))


def _map_state(state, fn):
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return type(state)(_map_state(s, fn) for s in state)
    return fn(state)


def _leaves(state) -> list:
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [leaf for s in state for leaf in _leaves(s)]
    return [state]
