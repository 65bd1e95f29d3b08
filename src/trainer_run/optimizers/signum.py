"""Signum and signSGD (MXNet ``signum_update`` / ``signsgd_update``).

With momentum (``signum_update``; ``state`` holds the negative of the momentum, as in
MXNet's ``SignumKernel``)::

    state  = momentum * state - (1 - momentum) * wd * weight
                              - (1 - momentum) * clip(rescale_grad * grad, clip_gradient)
    weight = (1 - lr * wd_lh) * weight + lr * sign(state)

Without momentum (``signsgd_update``, MXNet's ``SignSGDKernel``)::

    weight = (1 - lr * wd) * weight - lr * sign(grad)

signSGD takes the sign of the raw gradient: ``rescale_grad`` and ``clip_gradient`` have no
effect there, and weight decay is the coupled ``wd``. ``wd_lh`` is the decoupled decay of
Signum; MXNet 1.9.1 passes it to ``signsgd_update`` too, which has no such argument and
fails, so ``wd_lh != 0`` with ``momentum == 0`` is refused here when the optimizer is built.
``sign`` is MXNet's ``(x > 0) - (x < 0)`` (0 for NaN).
"""

from __future__ import annotations

from .. import jit
from ..backend import array_module
from ..errors import ConfigError, check_number
from ..jit import prange
from .optimizer import Optimizer, register, scalars
from .scalar_ops import sign
from .workspace import Workspace, chunks


def _signum_loop(w, g, m, lr, decay, momentum, decay_m, rescale_m, rescale, clip, clipping,
                 with_momentum):
    """signsgd_update (``w * decay - lr * sign(g)``) or signum_update, where ``decay_m`` is
    ``(1 - momentum) * wd`` and ``rescale_m`` ``(1 - momentum) * rescale``."""
    one = w.dtype.type(1)
    for i in prange(w.size):
        if not with_momentum:
            w[i] = w[i] * decay - lr * sign(g[i], one)
            continue
        if clipping:
            step = min(max(g[i] * rescale, -clip), clip) * (one - momentum)
        else:
            step = g[i] * rescale_m
        mi = m[i] * momentum - w[i] * decay_m - step
        m[i] = mi
        w[i] = w[i] * decay + lr * sign(mi, one)


_signum_kernel = jit.kernel(_signum_loop)


def _sign(xp, x, out, scratch):
    """MXNet's ``(x > 0) - (x < 0)`` into ``out`` (0 for zeros and NaN)."""
    xp.greater(x, 0, out=out)
    xp.less(x, 0, out=scratch)
    out -= scratch
    return out


@register
class Signum(Optimizer):
    """Signum (signSGD when ``momentum`` is 0); see the module docstring for the rules."""

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = check_number("momentum", momentum, low=0, high=1)
        self.wd_lh = check_number("wd_lh", wd_lh, low=0)
        if self.momentum == 0.0 and self.wd_lh:
            raise ConfigError("wd_lh must be 0 when momentum is 0: MXNet's signsgd_update "
                              "has no decoupled weight decay (it would fail)")
        self._workspace = Workspace()

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return array_module(weight).zeros_like(weight)

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        lr, wd, momentum, rescale, wd_lh = scalars(
            weight.dtype, self._get_lr(index), self._get_wd(index), self.momentum,
            self.grad_rescale(rescale_grad), self.wd_lh)
        xp = array_module(weight)
        one = weight.dtype.type(1)
        if state is None:                                   # signsgd_update
            sign = _sign(xp, grad, xp.empty_like(weight), xp.empty_like(weight))
            weight[...] = (one - lr * wd) * weight - lr * sign
            return
        if self.clipping:
            clip = weight.dtype.type(self.clip_gradient)
            step = (one - momentum) * xp.clip(rescale * grad, -clip, clip)
        else:
            step = ((one - momentum) * rescale) * grad
        state[...] = momentum * state - ((one - momentum) * wd) * weight - step
        sign = _sign(xp, state, xp.empty_like(weight), xp.empty_like(weight))
        weight[...] = (one - lr * wd_lh) * weight + lr * sign

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, rescale, wd_lh = scalars(weight.dtype, lr, wd, self.momentum,
                                                   rescale_grad, self.wd_lh)
        xp = array_module(weight)
        one = weight.dtype.type(1)
        if jit.usable(_signum_kernel, weight, grad, *([] if state is None else [state])):
            clip = weight.dtype.type(self.clip_gradient) if self.clipping else one
            jit.launch(_signum_kernel, weight.size, weight, grad, weight if state is None else state,
                       lr, one - lr * (wd if state is None else wd_lh), momentum,
                       (one - momentum) * wd, (one - momentum) * rescale, rescale, clip,
                       self.clipping, state is not None)
            return
        a, b = self._workspace.get(weight, 2)
        if state is None:
            decay = one - lr * wd
            for n, (w, g) in chunks(weight, grad):
                s = _sign(xp, g, a[:n], b[:n])
                s *= lr
                w *= decay
                w -= s
            return
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        decay = one - lr * wd_lh
        for n, (w, g, m) in chunks(weight, grad, state):
            t = a[:n]
            m *= momentum
            xp.multiply(w, (one - momentum) * wd, out=t)
            m -= t
            if clip is None:
                xp.multiply(g, (one - momentum) * rescale, out=t)
            else:
                xp.multiply(g, rescale, out=t)
                xp.clip(t, -clip, clip, out=t)
                t *= one - momentum
            m -= t
            s = _sign(xp, m, t, b[:n])
            s *= lr
            w *= decay
            w += s
