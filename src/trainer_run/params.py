"""Parameters and their flat storage.

A :class:`Parameter` is a named leaf of the graph with a ``grad`` buffer and the
per-parameter multipliers ``lr_mult`` and ``wd_mult`` (MXNet Gluon's names). A parameter whose
``requires_grad`` is False is frozen (Gluon's ``grad_req='null'``, PyTorch's
``requires_grad=False``): no function computes its gradient and no update touches it.

:class:`ParamStore` packs the parameters of a model into a few contiguous buffers,
one per :class:`ParamGroup` of parameters that share dtype, ``lr_mult`` and ``wd_mult``,
and rebinds every parameter's ``data`` and ``grad`` to views of them. An optimizer
step, a gradient all-reduce, a NaN check or a checkpoint then touches one buffer per
group instead of one array per layer. Parameters keep their order: the index of a
parameter (MXNet's ``index``) is its position in the model's ``params()``. Frozen parameters
are in no group (:attr:`ParamStore.frozen`): the optimizer, the kvstore, the gradient checks
and clipping never see them, as Gluon's Trainer skips ``grad_req='null'`` in its
``_allreduce_grads`` and ``_update``; they are saved and restored with the others.

Gradient rule: :meth:`ParamStore.cleargrads` marks every gradient stale without touching
memory; the first contribution of a backward pass then overwrites the buffer and later
ones add to it; :meth:`ParamStore.finalize_grads` zeroes the gradients no function
wrote. Gradient accumulation over micro-batches is simply several backward passes
between one ``cleargrads`` and the next.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy

from . import host_reads
from .autograd import Variable
from .backend import array_module
from .storage.background_write import host_copy


class Parameter(Variable):
    """A trainable array: ``data``, its gradient ``grad``, and its hyper-parameter multipliers.

    Args:
        data: the initial value (an array of the backend's module).
        name: the parameter's path in its model, e.g. ``"l1/W"``; set by the model.
        lr_mult: multiplies the learning rate for this parameter.
        wd_mult: multiplies the weight decay for this parameter.
        requires_grad: False freezes it (see the module docstring); set it before the
            updater packs the parameters (``model.freeze`` does).
    """

    __slots__ = ("name", "lr_mult", "wd_mult", "requires_grad", "_stale")

    def __init__(self, data, name: str = "", lr_mult: float = 1.0, wd_mult: float = 1.0,
                 requires_grad: bool = True):
        super().__init__(data)
        self.name = name
        self.lr_mult = float(lr_mult)
        self.wd_mult = float(wd_mult)
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self._stale = True

    def __repr__(self):
        return f"Parameter({self.name!r}, shape={self.data.shape}, dtype={self.data.dtype})"

    def cleargrad(self) -> None:
        """Marks the gradient stale: the next contribution overwrites it."""
        self._stale = True

    def accumulate(self, g) -> None:
        """Adds ``g`` to the gradient (overwrites it when stale)."""
        if self.grad is None:
            self.grad = g.astype(self.data.dtype, copy=True)
        elif self._stale:
            self.grad[...] = g
        else:
            self.grad += g
        self._stale = False

    def accumulate_matmul(self, a, b) -> None:
        """Adds ``a @ b`` to the gradient, writing the product in place when stale."""
        if self._stale and self.grad is not None and a.dtype == self.grad.dtype:
            array_module(a).matmul(a, b, out=self.grad)
            self._stale = False
        else:
            self.accumulate(a @ b)

    def zero_if_stale(self) -> None:
        if self.grad is None:
            self.grad = array_module(self.data).zeros_like(self.data)
        elif self._stale:
            self.grad.fill(0)
        self._stale = False


class Persistent:
    """An array of a model's state that is not trained (Chainer's "persistent" value, such as
    batch normalization's running mean and variance): saved in checkpoints and ``model.npz``
    beside the parameters and restored with them, never given to the optimizer.

    The model updates ``data`` in place while it trains. Under ``updater=parallel`` the main
    replica's values are the model's (they are copied to the other replicas after every
    update); in a multi-process run each worker keeps its own and rank 0's are saved (a
    resume gives every worker rank 0's).
    """

    __slots__ = ("data", "name")

    def __init__(self, data, name: str = ""):
        self.data = data
        self.name = name

    def __repr__(self):
        return f"Persistent({self.name!r}, shape={self.data.shape}, dtype={self.data.dtype})"


class ParamGroup:
    """Parameters sharing dtype, ``lr_mult`` and ``wd_mult``, packed in flat buffers.

    Attributes:
        params: the parameters, in model order.
        indices: their indices in the model (MXNet's ``index``).
        slices: ``slices[k]`` locates parameter ``k`` in ``data`` and ``grad``.
        data, grad: the flat buffers; each parameter's ``data``/``grad`` is a view.
    """

    def __init__(self, params: list[Parameter], indices: list[int], xp):
        self.params = params
        self.indices = indices
        self.dtype = params[0].data.dtype
        self.lr_mult = params[0].lr_mult
        self.wd_mult = params[0].wd_mult
        self.slices = []
        start = 0
        for p in params:
            self.slices.append(slice(start, start + p.data.size))
            start += p.data.size
        self.data = xp.empty(start, dtype=self.dtype)
        self.grad = xp.zeros(start, dtype=self.dtype)
        for p, s in zip(params, self.slices):
            self.data[s] = p.data.ravel()
            p.data = self.data[s].reshape(p.data.shape)
            p.grad = self.grad[s].reshape(p.data.shape)
            p._stale = True

    @property
    def size(self) -> int:
        return self.data.size

    def view(self, flat, k: int):
        """Parameter ``k``'s part of a flat buffer laid out like ``data``, in its shape."""
        return flat[self.slices[k]].reshape(self.params[k].data.shape)


def finite_flag(flat):
    """Whether ``flat`` is all finite, as a 0-d boolean array on its device: two reductions
    and no temporary array (``max`` and ``min`` propagate NaN)."""
    xp = array_module(flat)
    if flat.size == 0:
        return xp.asarray(True)
    return xp.isfinite(flat.max()) & xp.isfinite(flat.min())


def _all(flags):
    result = None
    for flag in flags:
        result = flag if result is None else result & flag
    return numpy.asarray(True) if result is None else result


class ParamStore:
    """The parameters of one model, the trained ones packed into flat groups, the frozen ones
    (``requires_grad`` False) kept apart in :attr:`frozen`.

    Args:
        params: name -> :class:`Parameter`, in model order.
        xp: the array module the buffers live in.
        persistents: name -> :class:`Persistent`, the model's state saved and restored with
            the parameters (:meth:`state_dict`), not packed or trained.
    """

    def __init__(self, params: Mapping[str, Parameter], xp=numpy,
                 persistents: Mapping[str, Persistent] | None = None):
        self.params = dict(params)
        self.persistents = dict(persistents or {})
        self.names = list(self.params)
        self.frozen = {n: p for n, p in self.params.items() if not p.requires_grad}
        """name -> frozen parameter: in no group, never updated (see the module docstring)."""
        self.trained = [p for p in self.params.values() if p.requires_grad]
        by_key: dict[tuple, tuple[list, list]] = {}
        for index, p in enumerate(self.params.values()):
            if not p.requires_grad:
                continue
            key = (numpy.dtype(p.data.dtype).str, p.lr_mult, p.wd_mult)
            members, indices = by_key.setdefault(key, ([], []))
            members.append(p)
            indices.append(index)
        self.groups = [ParamGroup(m, i, xp) for m, i in by_key.values()]

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.params.values())

    def __len__(self) -> int:
        return len(self.params)

    @property
    def size(self) -> int:
        """Total number of trained scalar parameters (those in the groups)."""
        return sum(g.size for g in self.groups)

    def cleargrads(self) -> None:
        for p in self.trained:
            p._stale = True

    def finalize_grads(self) -> None:
        """Zeroes the gradients no backward pass wrote since :meth:`cleargrads`."""
        for p in self.trained:
            if p._stale:
                p.zero_if_stale()

    def grads_finite(self):
        """Whether every gradient is finite (no inf, no NaN), as a 0-d boolean array on the
        device (read it with :func:`trainer_run.host_reads.scalar`)."""
        return _all(finite_flag(g.grad) for g in self.groups)

    def params_finite(self) -> bool:
        """Whether every parameter is finite (no inf, no NaN): a read."""
        return bool(host_reads.scalar(_all(finite_flag(g.data) for g in self.groups)))

    def param_dict(self) -> dict[int, Parameter]:
        """index -> parameter, as MXNet's ``param_dict``."""
        return dict(enumerate(self.params.values()))

    def state_dict(self, to_numpy) -> dict:
        """name -> host copy of each parameter's and persistent value (read-only, see
        :func:`~trainer_run.storage.background_write.host_copy`)."""
        values = {**self.params, **self.persistents}
        return {name: host_copy(p.data, to_numpy) for name, p in values.items()}

    def load_state_dict(self, arrays: Mapping, asarray) -> None:
        """Copies saved values into the parameters and persistent values (in place, keeping
        the flat views)."""
        copy_params({**self.params, **self.persistents}, arrays, asarray)

    def copy_persistents_from(self, other: ParamStore, asarray) -> None:
        """Copies ``other``'s persistent values into this store's (in place)."""
        for name, p in self.persistents.items():
            p.data[...] = asarray(other.persistents[name].data)

    def copy_frozen_from(self, other: ParamStore, asarray) -> None:
        """Copies ``other``'s frozen parameters into this store's (in place): they never
        change while training, so a replica needs them once, after a load."""
        for name, p in self.frozen.items():
            p.data[...] = asarray(other.frozen[name].data)


def copy_params(params: Mapping[str, Parameter], arrays: Mapping, asarray=None) -> None:
    """Copies ``arrays`` (path -> array) into ``params`` in place, moved with ``asarray``
    (None: onto each parameter's device), after checking that every parameter is there with
    its shape; a mismatch names the first offending parameter."""
    missing = [n for n in params if n not in arrays]
    if missing:
        raise KeyError(f"saved parameters lack {', '.join(missing)}")
    for name, p in params.items():
        value = arrays[name]
        if tuple(value.shape) != tuple(p.data.shape):
            raise ValueError(
                f"saved parameter {name} has shape {tuple(value.shape)}, "
                f"the model has {tuple(p.data.shape)}"
            )
    for name, p in params.items():
        move = asarray or array_module(p.data).asarray
        p.data[...] = move(arrays[name])
