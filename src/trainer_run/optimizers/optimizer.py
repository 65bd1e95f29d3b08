"""The optimizer base class and registry, with MXNet 1.9's arguments and semantics.

Shared behaviour (MXNet ``Optimizer``):

- The learning rate has one owner: the scheduler when one is set (the optimizer asks it,
  ``lr_scheduler(num_update)``), else ``learning_rate`` (default 0.01). As in MXNet 1.9, a
  ``learning_rate`` given beside a scheduler is written into its ``base_lr``; without one
  (``None``, as the command line passes it) the scheduler's own ``base_lr`` stands.
- ``num_update`` is the largest per-index update count; each index counts its updates
  from ``begin_num_update``. Counting happens before the learning rate is read, so the
  first update sees ``num_update == begin_num_update + 1``.
- Per-index learning rate and weight decay: ``param_dict[index].lr_mult`` first, then
  ``lr_mult[index]`` (set by :meth:`set_lr_mult`), then ``lr_mult[param_idx2name[index]]``.
  With ``param_idx2name``, names not ending in ``_weight`` or ``_gamma`` get ``wd_mult``
  0 unless set explicitly.
- ``rescale_grad`` multiplies the gradient; ``clip_gradient`` (None, 0 or negative: off)
  clips it to ``[-clip_gradient, clip_gradient]``. Where they apply relative to weight
  decay is each optimizer's business and follows MXNet's kernels. One step may bring a
  factor of its own (``rescale_grad=`` of :meth:`Optimizer.update_multi_precision` and
  :meth:`Optimizer.fused_update`: a loss-scaled step's, ``rescale_grad / scale``, as MXNet's
  AMP folds the scale into it); the optimizer's own ``rescale_grad`` is never changed.

Subclasses implement ``create_state`` and
``fused_step(weight, grad, state, lr, wd, count, segments, rescale_grad)``: the update of one
flat buffer holding one or several parameters back to back, with scalar hyper-parameters (the
step's factor among them), done in place with as few passes over memory as possible. It is
the optimizer's rule, written once for each execution path: a compiled loop
(:mod:`trainer_run.jit`, element operations from :mod:`.scalar_ops`) and an array path over
cache-sized chunks (:mod:`.array_ops`, :mod:`.workspace`), which give the same bits.
:meth:`Optimizer.update` (one parameter) runs it on the parameter's arrays seen flat.
``segments`` lists one slice per parameter, for updates that need per-tensor reductions
(LAMB's trust ratio); element-wise updates ignore it. Scalar hyper-parameters are cast to
the weight's dtype before use, as MXNet's kernels do. An optimizer whose state is not shaped
like the weight sets ``flat_state = False`` and overrides ``update`` instead; its states are
then created per index and it is updated per index. The readable formulas, in float64, are
the tests' oracle (``tests/optimizers/``).
"""

from __future__ import annotations

import warnings

import numpy

from .. import jit, registry
from ..errors import ConfigError, check, check_number
from ..storage.states import map_state

REGISTRY: dict[str, type] = {}
"""Optimizer classes by lower-case class name (MXNet's rule)."""


def register(klass: type) -> type:
    """Registers an optimizer class under its lower-case class name (a class decorator)."""
    return registry.register(REGISTRY, "optimizer", klass)


def learning_rate_of(value) -> float:
    """``value`` as a learning rate: a number >= 0 (the rule of :class:`Optimizer` and of
    :meth:`Optimizer.set_learning_rate`)."""
    return check_number("learning_rate", value, low=0)


def below_one(name: str, value, why: str) -> float:
    """``value`` as a decay rate in ``[0, 1)``; the message refusing 1 says ``why`` (what
    ``name = 1`` would break)."""
    rate = check_number(name, value, low=0, high=1)
    check(rate < 1, f"{name} must be < 1, got {value!r} ({why})")
    return rate


def create(name: str, **kwargs) -> "Optimizer":
    """Instantiates the optimizer registered as ``name`` (case-insensitive) with ``kwargs``."""
    return registry.create(REGISTRY, "optimizer", name, **kwargs)


class Optimizer:
    """Base class of all optimizers; see the module docstring for the shared semantics."""

    def __init__(self, rescale_grad=1.0, param_idx2name=None, wd=0.0, clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        self.rescale_grad = check_number("rescale_grad", rescale_grad)
        if learning_rate is None and lr_scheduler is None:
            learning_rate = 0.01
        self.lr = None if learning_rate is None else learning_rate_of(learning_rate)
        self.wd = check_number("wd", wd, low=0)
        if clip_gradient is not None:
            clip_gradient = check_number("clip_gradient", clip_gradient)
        self.clip_gradient = clip_gradient
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None and self.lr is not None:
            lr_scheduler.base_lr = self.lr
        self.begin_num_update = check_number("begin_num_update", begin_num_update, low=0,
                                             integer=True)
        self.num_update = self.begin_num_update
        self._index_update_count: dict = {}
        self.multi_precision = bool(multi_precision)
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise ConfigError("param_idx2name must be a dict from index to parameter name")
        self.idx2name = dict(param_idx2name)
        self.param_dict = dict(param_dict) if param_dict else {}
        self.lr_mult: dict = {}
        self.wd_mult: dict = {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    # -- learning rate and weight decay -------------------------------------------------
    @property
    def learning_rate(self) -> float:
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    @property
    def starting_rate(self) -> float:
        """The rate training starts from: ``learning_rate``, or the scheduler's ``base_lr``
        when it owns the rate."""
        return self.lr if self.lr is not None else self.lr_scheduler.base_lr

    def require_positive_rate(self, why: str) -> None:
        """Refuses a rate that is or can become 0, for an update that divides by it (``why``
        says where): the starting rate must be > 0 and the schedule must never bring it to 0
        (:meth:`~trainer_run.schedulers.LRScheduler.zero_rate`)."""
        check(self.starting_rate > 0, f"learning_rate must be > 0, got {self.starting_rate!r} ({why})")
        cause = self.lr_scheduler.zero_rate() if self.lr_scheduler is not None else None
        if cause is not None:
            name, how = cause
            raise ConfigError(f"learning_rate must stay > 0 ({why}), but {how}: set "
                              f"scheduler.{name} > 0")

    def set_learning_rate(self, lr: float) -> None:
        """Sets the learning rate; refused (UserWarning raised) when a scheduler is set."""
        if self.lr_scheduler is not None:
            raise UserWarning(
                "LRScheduler of the optimizer has already been defined. Note that "
                "set_learning_rate can mutate the value of the learning rate of the optimizer "
                "only when the LRScheduler of the optimizer is undefined."
            )
        self.lr = learning_rate_of(lr)

    def set_lr_mult(self, args_lr_mult: dict) -> None:
        """Sets learning-rate multipliers by index or by name (replacing earlier ones)."""
        self.lr_mult = dict(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        """Sets weight-decay multipliers; names not ending in ``_weight``/``_gamma`` default to 0."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values()
                        if not (n.endswith("_weight") or n.endswith("_gamma"))}
        self.wd_mult.update(args_wd_mult)

    def follow(self, num_update: int) -> None:
        """Takes ``num_update`` as the update count without updating anything (the per-index
        counts stay): a ``dist_async`` worker's optimizer follows its server's count, so the
        learning rate it reports is the server's."""
        self.num_update = num_update

    counts_updates = True
    """Whether an update counts (MXNet's ``Test`` optimizer does not)."""

    def _counted(self, indices) -> int:
        """Counts an update of each of ``indices`` (when :attr:`counts_updates`); the first
        one's count."""
        if self.counts_updates:
            for index in indices:
                self._update_count(index)
        return self._index_update_count.get(indices[0], self.begin_num_update)

    def _update_count(self, index) -> None:
        count = self._index_update_count.get(index, self.begin_num_update) + 1
        self._index_update_count[index] = count
        self.num_update = max(count, self.num_update)

    def _mult(self, index, attribute: str, table: dict) -> float:
        if index in self.param_dict:
            return getattr(self.param_dict[index], attribute)
        if index in table:
            return table[index]
        if index in self.idx2name:
            return table.get(self.idx2name[index], 1.0)
        return 1.0

    def _get_lr(self, index) -> float:
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        return lr * self._mult(index, "lr_mult", self.lr_mult)

    def _get_wd(self, index) -> float:
        return self.wd * self._mult(index, "wd_mult", self.wd_mult)

    @property
    def clipping(self) -> bool:
        """Whether gradients are clipped (MXNet: ``clip_gradient`` truthy and >= 0)."""
        return bool(self.clip_gradient) and self.clip_gradient >= 0

    # -- states and updates -----------------------------------------------------------------
    def create_state(self, index, weight):
        """Auxiliary state (arrays, tuples of arrays, or None) for one weight."""
        return None

    master_first = True
    """Layout of a multi-precision state: ``(master, state)`` (MXNet's base class) or, when
    False, ``(state, master)`` (MXNet's SGD, LARS and AdamW)."""

    def create_state_multi_precision(self, index, weight):
        """Like :meth:`create_state`, plus a float32 master copy for float16 weights.

        With ``multi_precision`` and a float16 weight the state is ``(master, state)`` (or
        ``(state, master)``, see :attr:`master_first`). Without it, a float16 weight draws
        MXNet's warning.
        """
        if self.multi_precision and weight.dtype == numpy.float16:
            master = weight.astype(numpy.float32)
            inner = self.create_state(index, master)
            return (master, inner) if self.master_first else (inner, master)
        if weight.dtype == numpy.float16:
            warnings.warn(
                "Accumulating with float16 in optimizer can lead to poor accuracy or slow "
                "convergence. Consider using multi_precision=True option of the optimizer"
            )
        return self.create_state(index, weight)

    def update(self, index, weight, grad, state, rescale_grad=None) -> None:
        """Updates ``weight`` in place from ``grad`` and ``state``, with the gradient factor
        :meth:`grad_rescale` of ``rescale_grad``: counts the update, then runs
        :meth:`fused_step` on the arrays seen as one flat segment. An optimizer without a
        fused step (state not shaped like the weight) overrides this."""
        if self.fused_step is None:
            raise NotImplementedError(f"{type(self).__name__} must define fused_step or update")
        count = self._counted([index])
        flat = _Flat()
        self.fused_step(flat(weight), grad.reshape(-1), map_state(state, flat), self._get_lr(index),
                        self._get_wd(index), count, [slice(0, weight.size)],
                        self.grad_rescale(rescale_grad))
        flat.write_back()

    def update_multi_precision(self, index, weight, grad, state, rescale_grad=None) -> None:
        """:meth:`update` through the float32 master copy when the state holds one.
        ``rescale_grad``: this step's gradient factor (None: the optimizer's; an ``update``
        of MXNet's four arguments is then called with those only)."""
        step = {} if rescale_grad is None else {"rescale_grad": rescale_grad}
        if self.multi_precision and weight.dtype == numpy.float16:
            master, inner = self._split_master(state)
            self.update(index, master, grad.astype(numpy.float32), inner, **step)
            weight[...] = master
        else:
            self.update(index, weight, grad, state, **step)

    def grad_rescale(self, rescale_grad=None) -> float:
        """The factor one step multiplies the gradient by: ``rescale_grad`` where the step
        was given one, else the optimizer's :attr:`rescale_grad`."""
        return self.rescale_grad if rescale_grad is None else rescale_grad

    fused_step = None
    """Optional ``fused_step(weight, grad, state, lr, wd, count, segments, rescale_grad)`` on
    flat buffers."""

    flat_state = True
    """Whether ``create_state`` returns arrays shaped like the weight (or None)."""

    order_sensitive = False
    """Whether the optimizer carries state across indices (Nadam's momentum schedule), so
    that parameters must be updated in index order, as MXNet's Trainer does."""

    rng = None
    """The generator of optimizers that draw random numbers (SGLD), see :meth:`set_rng`."""

    def set_rng(self, rng) -> None:
        """Draws random numbers from ``rng`` (a NumPy ``Generator``) from now on; an updater
        gives its backend's, so the draws are seeded and checkpointed with the run."""
        self.rng = rng

    def fused_update(self, indices, weight, grad, state, segments=None, rescale_grad=None) -> None:
        """Updates a flat group whose indices share count, lr and wd in one fused step.

        Equivalent to calling :meth:`update` on every index in order, since all indices
        see the same ``num_update`` once counted. ``segments`` (default: the whole buffer
        is one tensor) gives each parameter's slice; ``rescale_grad`` this step's gradient
        factor (None: the optimizer's).
        """
        count = self._counted(indices)
        first = indices[0]
        segments = segments if segments is not None else [slice(0, weight.size)]
        lr, wd, rescale = self._get_lr(first), self._get_wd(first), self.grad_rescale(rescale_grad)
        if self.multi_precision and weight.dtype == numpy.float16:
            master, inner = self._split_master(state)
            with jit.unbatched():
                self.fused_step(master, grad.astype(numpy.float32), inner, lr, wd, count,
                                segments, rescale)
            weight[...] = master
        else:
            self.fused_step(weight, grad, state, lr, wd, count, segments, rescale)

    def _split_master(self, state):
        """``(master, inner_state)`` of a multi-precision state."""
        return state if self.master_first else (state[1], state[0])

    def can_fuse(self, indices) -> bool:
        """Whether ``indices`` may be updated by one :meth:`fused_update` call."""
        if self.fused_step is None:
            return False
        counts, begin = self._index_update_count, self.begin_num_update
        if not (self.param_dict or self.lr_mult or self.wd_mult):
            return len({counts.get(i, begin) for i in indices}) == 1
        return len({(counts.get(i, begin), self._mult(i, "lr_mult", self.lr_mult),
                     self._mult(i, "wd_mult", self.wd_mult)) for i in indices}) == 1

    # -- state ----------------------------------------------------------------------------
    def hyper_parameters(self) -> dict:
        """Public scalar attributes (learning rate, decay rates, ...), as plain data."""
        return {k: v for k, v in vars(self).items()
                if not k.startswith("_") and isinstance(v, (bool, int, float, str, type(None)))}

    def state_dict(self) -> dict:
        """Counters and the scheduler's progress as plain data. Hyper-parameters, the learning
        rate included, are the constructor's: loading a state into an optimizer built with
        another ``learning_rate`` (or ``wd``, ...) continues with that one."""
        state = {
            "num_update": self.num_update,
            "index_update_count": {str(k): v for k, v in self._index_update_count.items()},
        }
        if self.lr_scheduler is not None:
            state["lr_scheduler"] = self.lr_scheduler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.num_update = state["num_update"]
        self._index_update_count = {index_key(k): v for k, v in state["index_update_count"].items()}
        if self.lr_scheduler is not None and "lr_scheduler" in state:
            self.lr_scheduler.load_state_dict(state["lr_scheduler"])


class _Flat:
    """Arrays seen as one dimension: a view of a C-contiguous array, else a copy that
    :meth:`write_back` copies into the original."""

    def __init__(self):
        self._copies = []

    def __call__(self, array):
        flat = array.reshape(-1)
        if not array.flags.c_contiguous:
            self._copies.append((array, flat))
        return flat

    def write_back(self) -> None:
        for array, flat in self._copies:
            array[...] = flat.reshape(array.shape)


def python_clip(optimizer, dtype):
    """``(clipping, bound)`` for optimizers whose MXNet update is Python code that clips
    whenever ``clip_gradient is not None``; ``bound`` is cast to ``dtype``."""
    if optimizer.clip_gradient is None:
        return False, None
    return True, numpy.dtype(dtype).type(optimizer.clip_gradient)


def index_key(key: str):
    """A parameter index back from its JSON key: integer indices were written as digits."""
    return int(key) if key.lstrip("-").isdigit() else key


def scalars(dtype, *values):
    """``values`` cast to ``dtype``'s scalar type, as MXNet's kernels cast their parameters."""
    return tuple(map(numpy.dtype(dtype).type, values))
