"""Appliers: an optimizer applied to weights, with the optimizer's state of each index
(MXNet's per-index ``optimizer.Updater``), extended to flat parameter groups.

Here "updater" names the iteration only (:mod:`trainer_run.updaters`, Chainer's); the object
MXNet calls an updater is an applier. ``get_updater(optimizer)`` keeps MXNet's name and
returns an :class:`IndexApplier`: called as ``applier(index, grad, weight)`` it creates the
index's state on first use (through ``create_state_multi_precision``) and applies
``update_multi_precision`` in place, exactly as MXNet's ``optimizer.Updater``. Called with
lists of indices, gradients and weights it updates each in turn.

:meth:`IndexApplier.attach` binds a :class:`~trainer_run.params.ParamStore`: each group's
state is created once as flat buffers and every index's state is a view into them, so the
per-index path and the fused path (:meth:`IndexApplier.step`) read and write the same
memory and may be mixed freely.

Saving and loading the states is :mod:`.saved_states`'s: states loaded for an index that has
none yet wait until the optimizer creates it (at its first update, or when attached).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import jit
from ..backend import array_module
from ..storage.states import map_state, state_leaves
from . import saved_states
from .optimizer import Optimizer, index_key


def get_updater(optimizer: Optimizer) -> "IndexApplier":
    """The per-index updater closure for ``optimizer`` (MXNet ``optimizer.get_updater``)."""
    return IndexApplier(optimizer)


class IndexApplier:
    """Keeps optimizer states per index and applies the optimizer to weights in place."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self._groups: list[tuple] = []
        self._flat: dict = {}
        self._waiting: dict = {}  # index -> saved leaves loaded before its state existed
        self._kept: list = []  # copies of the weights and states under a masked step

    def __call__(self, index, grad, weight, scale: float = 1.0) -> None:
        """Updates ``weight`` of ``index`` (or of each index of a list) from ``grad``;
        ``scale``, a factor ``grad`` carries (a loss scale), is divided out by the optimizer
        step (see :meth:`step`)."""
        if isinstance(index, (list, tuple)):
            if scale != 1.0:
                raise ValueError("the list form of an updater call takes no scale")
            self._update_list(index, grad, weight)
            return
        if index not in self.states:
            self._set_state(index, self.optimizer.create_state_multi_precision(index, weight))
        self.optimizer.update_multi_precision(index, weight, grad, self.states[index],
                                              self._factor(scale))

    def _factor(self, scale: float):
        """The step's gradient factor for gradients that carry ``scale``: the optimizer's
        ``rescale_grad / scale`` (None, the optimizer's own, when ``scale`` is 1)."""
        return None if scale == 1.0 else self.optimizer.rescale_grad / scale

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
                    self._set_state(index, opt.create_state_multi_precision(index, weight))
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
                    self._set_state(index, opt.create_state_multi_precision(index, p.data))
                self._groups.append((group, None, False))
                continue
            flat = opt.create_state_multi_precision(group.indices[0], group.data)
            for k, index in enumerate(group.indices):
                self._set_state(index, map_state(flat, lambda a, k=k: group.view(a, k)))
            self._groups.append((group, flat, True))

    def step(self, scale: float = 1.0) -> None:
        """Applies one update to every attached parameter: one fused pass per group where
        the group's indices share update count and multipliers, per index otherwise. An
        order-sensitive optimizer with several groups is updated per index in index order.

        ``scale``: a factor the gradients carry (a loss scale); the step's gradient factor
        is then the optimizer's ``rescale_grad / scale``, passed to the optimizer with the
        step, so the unscaling happens in the optimizer's precision (MXNet's AMP)."""
        opt = self.optimizer
        rescale_grad = self._factor(scale)
        if opt.order_sensitive and len(self._groups) > 1:
            members = sorted((i, p) for group, _, _ in self._groups
                             for i, p in zip(group.indices, group.params))
            for index, p in members:
                opt.update_multi_precision(index, p.data, p.grad, self.states[index], rescale_grad)
            return
        for entry in self._groups:
            self._step_group(entry, entry[0].data, entry[0].grad, rescale_grad)

    @contextlib.contextmanager
    def unless(self, applied):
        """A context whose steps are kept only where ``applied`` (a 0-d boolean array on the
        device) is true: the attached weights and optimizer states are copied on entering and
        copied back on leaving where it is false, all on the device (see
        :mod:`trainer_run.updaters.device_verdict`)."""
        leaves = self._leaves()
        kept = self._kept
        if len(kept) != len(leaves) or any(k.shape != a.shape or k.dtype != a.dtype
                                           for k, a in zip(kept, leaves)):
            kept = self._kept = [array_module(a).empty_like(a) for a in leaves]
        for copy, leaf in zip(kept, leaves):
            copy[...] = leaf
        yield
        refused = ~applied
        for copy, leaf in zip(kept, leaves):
            array_module(leaf).copyto(leaf, copy, where=refused)

    def _leaves(self) -> list:
        """The attached groups' weight buffers and every leaf of their optimizer states."""
        leaves = []
        for group, flat, is_flat in self._groups:
            leaves.append(group.data)
            states = [flat] if is_flat else [self.states[i] for i in group.indices]
            leaves += [leaf for state in states for leaf in state_leaves(state)]
        return leaves

    def step_group(self, k: int, data, grad, scale: float = 1.0) -> None:
        """Group ``k``'s part of :meth:`step` on ``data`` and ``grad``, flat arrays laid out
        like the group's buffers (a kvstore server's own), updated in place of them."""
        self._step_group(self._groups[k], data, grad, self._factor(scale))

    def _step_group(self, entry, data, grad, rescale_grad=None) -> None:
        group, flat, is_flat = entry
        opt = self.optimizer
        if is_flat and opt.can_fuse(group.indices):
            opt.fused_update(group.indices, data, grad, flat, group.slices, rescale_grad)
            return
        for k, index in enumerate(group.indices):
            opt.update_multi_precision(index, group.view(data, k), group.view(grad, k),
                                       self.states[index], rescale_grad)

    # -- state (the format: :mod:`.saved_states`) ---------------------------------------
    def _set_state(self, index, state) -> None:
        """Makes ``state`` index ``index``'s, filled from states loaded for it earlier."""
        waiting = self._waiting.pop(index, None)
        if waiting is not None:
            saved_states.copy_leaves(saved_states.checked({index: state}, {index: waiting[0]}),
                                     waiting[1])
        self.states[index] = state

    def state_dict(self, to_numpy) -> dict:
        """The states as saved (:func:`.saved_states.saved`)."""
        return saved_states.saved(self.states, to_numpy)

    def load_state_dict(self, loaded: dict, asarray=None) -> None:
        """Copies saved states (:func:`.saved_states.saved`'s form; a checkpoint's) into the
        existing ones, moved with ``asarray`` (default: onto each state's device). Every
        state is checked first (ValueError; KeyError for an index without a state: attach
        the parameters first); a refused load writes nothing."""
        missing = [k for k in loaded if index_key(k) not in self.states]
        if missing:
            raise KeyError(f"no optimizer state for index {missing[0]}; attach the parameters first")
        self._load({index_key(k): v for k, v in loaded.items()}, asarray, lambda i: f"index {i}")

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """All states as a blob in the safe format (:func:`.saved_states.encode`); with
        ``dump_optimizer`` the optimizer's hyper-parameters, counters and scheduler state too,
        as MXNet's ``get_states(dump_optimizer=True)``."""
        return saved_states.encode(self.states, self.optimizer if dump_optimizer else None)

    def set_states(self, blob: bytes, asarray=None, key_of=index_key,
                   name=lambda index: f"index {index}") -> None:
        """Restores :meth:`get_states` output once all of it is checked: the optimizer's kind
        when dumped, then every state (ValueError naming it with ``name(index)``; nothing
        written). Blob keys become indices through ``key_of``. A state loaded for an index
        without one yet is kept until the optimizer creates it (MXNet loads states before the
        first update)."""
        loaded, dumped = saved_states.decode(blob)
        saved_states.check_optimizer(self.optimizer, dumped)
        self._load({key_of(k): v for k, v in loaded.items()}, asarray, name)
        saved_states.restore_optimizer(self.optimizer, dumped)

    def _load(self, loaded: dict, asarray, name) -> None:
        saved_states.copy_leaves(saved_states.checked(self.states, loaded, name), asarray)
        self._waiting.update({i: (v, asarray) for i, v in loaded.items() if i not in self.states})


class GroupApplier:
    """``updater(key, grad, weight)`` over the flat groups of a
    :class:`~trainer_run.params.ParamStore`: key ``k`` is group ``k``, ``grad`` and ``weight``
    its flat gradient and weights (as a kvstore server holds them). ``weight`` takes the
    group's step in place, exactly as in :meth:`IndexApplier.step` (the same fused pass,
    per-parameter multipliers and counts); the store only lays out the groups.

    This is what a ``dist_async`` server runs: the same numbers as a local update of the
    same group with the same gradient. An order-sensitive optimizer (Nadam, whose one
    ``m_schedule`` advances at every parameter's update) sees the parameters in the order the
    groups are pushed, group by group, rather than in index order across groups as
    :meth:`IndexApplier.step` does. ``get_states`` / ``set_states`` are the
    :class:`IndexApplier`'s (safe format).
    """

    def __init__(self, optimizer: Optimizer, store):
        self.optimizer = optimizer
        self.applier = get_updater(optimizer)
        self.applier.attach(store)

    def __call__(self, key, grad, weight, scale: float = 1.0) -> None:
        self.applier.step_group(key, weight.reshape(-1), grad.reshape(-1), scale)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        return self.applier.get_states(dump_optimizer)

    def set_states(self, blob: bytes) -> None:
        self.applier.set_states(blob)


_NOT_FLAT = object()


def _contiguous(*items) -> bool:
    return all(a.flags.c_contiguous for item in items for a in state_leaves(item))
