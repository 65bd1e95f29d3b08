"""Large-batch SGD (MXNet ``LBSGD``): gradient accumulation over ``batch_scale`` updates
and a warmup of the learning rate, around MXNet's ``sgd_update`` / ``sgd_mom_update``.

Per index, every update adds the gradient to a cumulated gradient and counts it
(``num_cums``, starting at ``begin_epoch * updates_per_epoch + 1`` and never reset). When
``num_cums % batch_scale == 0`` (a macro-batch is complete)::

    grad   = cum_grad / batch_scale
    lr     = lr * lbmult          # warmup multiplier, or the LARS ratio
    # then SGD as in sgd.py:
    state  = momentum * state - lr * wd * weight - lr * clip(rescale_grad * grad, clip_gradient)
    weight = weight + state       # without momentum: (1 - lr * wd) * weight - lr * clip(...)

and the cumulated gradient is reset. Other updates call ``sgd_update`` with ``lr = 0`` and
default ``rescale_grad`` / ``clip_gradient``: ``weight = (1 - 0 * wd) * weight - 0 * grad``,
which leaves the weight unchanged (a non-finite gradient still turns it into NaN, as in
MXNet), and the momentum untouched.

``lbmult`` with ``nwup = warmup_epochs * updates_per_epoch`` and ``nup = num_cums``: the
``batch_scale`` once ``nup >= nwup``; 1 when ``nwup <= 1``; otherwise ``linear``
``1 + (batch_scale - 1) * nup / nwup``, ``power2`` ``1 + (batch_scale - 1) * nup**2 / nwup**2``
or ``sqrt`` ``1 + (batch_scale - 1) * sqrt(nup / nwup)``. ``lars`` uses instead
``sqrt(|w|^2 / (|g|^2 + wd * |w|^2 + 1e-18))`` clamped to ``[0.01, 100]`` (``g`` the averaged
cumulated gradient, before ``rescale_grad``).

As in MXNet, the learning rate and weight decay are read *before* the update is counted
(unlike the other optimizers), so a scheduler sees the previous ``num_update``.

The cumulated gradients are Python-side per-index state, part of :meth:`state_dict`.
Deviation: MXNet keeps a *reference* to the first gradient of a run as the cumulated
gradient, so when the caller reuses its gradient buffers (Gluon does) the first
macro-batch counts the second gradient twice; here the first gradient is copied.
"""

from __future__ import annotations

import math

import numpy

from ..backend import array_module
from ..errors import ConfigError, check_number
from .optimizer import index_key, register, scalars
from .sgd import MomentumOptimizer

STRATEGIES = ("linear", "power2", "sqrt", "lars")


@register
class LBSGD(MomentumOptimizer):
    """Large-batch SGD; see the module docstring for the update rule."""

    flat_state = False      # the cumulated gradients live on the Python side, per index

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear",
                 warmup_epochs=5, batch_scale=1, updates_per_epoch=32, begin_epoch=0,
                 num_epochs=60, **kwargs):
        super().__init__(momentum=momentum, multi_precision=multi_precision, **kwargs)
        if warmup_strategy not in STRATEGIES:
            raise ConfigError(f"warmup_strategy must be one of {', '.join(STRATEGIES)}, "
                              f"got {warmup_strategy!r}")
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = check_number("warmup_epochs", warmup_epochs, low=0, integer=True)
        self.batch_scale = check_number("batch_scale", batch_scale, low=1, integer=True)
        self.updates_per_epoch = check_number("updates_per_epoch", updates_per_epoch, low=0,
                                              integer=True)
        self.begin_epoch = check_number("begin_epoch", begin_epoch, low=0, integer=True)
        self.init_updates = self.begin_epoch * self.updates_per_epoch
        self.num_epochs = check_number("num_epochs", num_epochs, low=0, integer=True)
        self.cumgrads: dict = {}

    # -- MXNet's helpers --------------------------------------------------------------------
    def _get_lbmult(self, nup):
        """The warmup multiplier of the learning rate after ``nup`` cumulated updates."""
        nwup = self.warmup_epochs * self.updates_per_epoch
        strategy = self.warmup_strategy
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            mult = maxmult
        elif nwup <= 1:
            mult = 1.0
        elif strategy == "linear":
            mult = 1.0 + (maxmult - 1) * nup / nwup
        elif strategy == "power2":
            mult = 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        elif strategy == "sqrt":
            mult = 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        else:
            mult = 1.0
        return mult

    def _get_lars(self, weight, g, wd):
        """The layer-wise ratio ``sqrt(|w|^2 / (|g|^2 + wd |w|^2 + 1e-18))`` in [0.01, 100]."""
        weight2 = _l2norm(weight)
        grad2 = _l2norm(g)
        lars = math.sqrt(weight2 / (grad2 + wd * weight2 + 1e-18))
        return min(max(lars, 0.01), 100.0)

    def _cumulate_gradient(self, grad, index) -> dict:
        """Adds ``grad`` to the index's cumulated gradient and counts it."""
        cgrad = self.cumgrads.get(index)
        if cgrad and cgrad["num_cums"] > 0:
            cum = cgrad["cum_grad"]
            if isinstance(cum, int):                       # reset to 0 after a macro-batch
                cum_grad = cum + grad
            else:
                cum_grad = array_module(grad).asarray(cum)  # a restored host copy on a device
                cum_grad += grad
            num_cums = cgrad["num_cums"] + 1
        else:
            cum_grad = grad.copy()                         # MXNet keeps a reference here
            num_cums = self.init_updates + 1
        cgrad = {"cum_grad": cum_grad, "num_cums": num_cums}
        self.cumgrads[index] = cgrad
        return cgrad

    # -- update ---------------------------------------------------------------------------------
    def update(self, index, weight, grad, state, rescale_grad=None):
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        self._update_count(index)
        cgrad = self._cumulate_gradient(grad, index)
        if cgrad["num_cums"] % self.batch_scale == 0:
            grad = cgrad["cum_grad"] / weight.dtype.type(self.batch_scale)
            if self.warmup_strategy == "lars":
                lbmult = self._get_lars(weight, grad, wd)
            else:
                lbmult = self._get_lbmult(cgrad["num_cums"])
            _sgd(weight, grad, state, lr * lbmult, wd, self.momentum, self.grad_rescale(rescale_grad),
                 self.clip_gradient if self.clipping else None)
            cgrad["cum_grad"] = 0                          # MXNet's _reset_cum_gradient
        else:
            _sgd(weight, grad, None, 0.0, wd, 0.0, 1.0, None)

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The base counters plus the cumulated gradients (host arrays, or 0 after a reset)."""
        state = super().state_dict()
        state["cumgrads"] = {
            str(index): {"cum_grad": c["cum_grad"] if isinstance(c["cum_grad"], int)
                         else _host_copy(c["cum_grad"]),
                         "num_cums": c["num_cums"]}
            for index, c in self.cumgrads.items()
        }
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.cumgrads = {}
        for key, c in state.get("cumgrads", {}).items():
            cum = c["cum_grad"]
            if not isinstance(cum, int):
                cum = numpy.array(cum)                     # moved to the device on next use
            self.cumgrads[index_key(key)] = {"cum_grad": cum, "num_cums": int(c["num_cums"])}


def _sgd(weight, grad, mom, lr, wd, momentum, rescale, clip) -> None:
    """MXNet's ``sgd_update`` (``mom`` None) / ``sgd_mom_update`` kernels, in place."""
    lr, wd, momentum, rescale = scalars(weight.dtype, lr, wd, momentum, rescale)
    if clip is not None:
        clip = weight.dtype.type(clip)
        step = lr * array_module(grad).clip(rescale * grad, -clip, clip)
    else:
        step = (lr * rescale) * grad
    if mom is None:
        weight[...] = (1 - lr * wd) * weight - step
    else:
        mom[...] = momentum * mom - (lr * wd) * weight - step
        weight += mom


def _l2norm(v) -> float:
    """MXNet's ``multiply(v, v).asnumpy().sum()``: squares in the array's dtype, summed."""
    return float(_host_copy(v * v).sum())


def _host_copy(a) -> numpy.ndarray:
    if isinstance(a, numpy.ndarray):
        return a.copy()
    return array_module(a).asnumpy(a)
