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
from .array_ops import momentum_into, scaled_step, sign
from .optimizer import register, scalars
from .scalar_ops import momentum as momentum_one
from .scalar_ops import scaled_step as scaled_step_one
from .scalar_ops import sign as sign_one
from .sgd import MomentumOptimizer
from .workspace import chunks


def _signum_loop(w, g, m, lr, decay, momentum, decay_m, rescale, clip, clipping,
                 with_momentum):
    """signsgd_update (``w * decay - lr * sign(g)``) or signum_update, where ``decay_m`` is
    ``(1 - momentum) * wd``."""
    one = w.dtype.type(1)
    rate_m = one - momentum
    for i in prange(w.size):
        if not with_momentum:
            w[i] = w[i] * decay - lr * sign_one(g[i], one)
            continue
        step = scaled_step_one(g[i], rate_m, rescale, clip, clipping)
        mi = momentum_one(m[i], w[i], step, momentum, decay_m)
        m[i] = mi
        w[i] = w[i] * decay + lr * sign_one(mi, one)


_signum_kernel = jit.kernel(_signum_loop)


@register
class Signum(MomentumOptimizer):
    """Signum (signSGD when ``momentum`` is 0); see the module docstring for the rules."""

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, momentum=momentum, **kwargs)
        self.wd_lh = check_number("wd_lh", wd_lh, low=0)
        if self.momentum == 0.0 and self.wd_lh:
            raise ConfigError("wd_lh must be 0 when momentum is 0: MXNet's signsgd_update "
                              "has no decoupled weight decay (it would fail)")

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, rescale, wd_lh = scalars(weight.dtype, lr, wd, self.momentum,
                                                   rescale_grad, self.wd_lh)
        one = weight.dtype.type(1)
        decay = one - lr * (wd if state is None else wd_lh)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        if jit.usable(_signum_kernel, weight, grad, *([] if state is None else [state])):
            jit.launch(_signum_kernel, weight.size, weight, grad, weight if state is None else state,
                       lr, decay, momentum, (one - momentum) * wd, rescale,
                       clip if clip is not None else one, clip is not None, state is not None)
            return
        xp = array_module(weight)
        a, b = self._workspace.get(weight, 2)
        if state is None:
            for n, (w, g) in chunks(weight, grad):
                s = sign(xp, g, a[:n], b[:n])
                s *= lr
                w *= decay
                w -= s
            return
        for n, (w, g, m) in chunks(weight, grad, state):
            step = scaled_step(xp, b[:n], g, one - momentum, rescale, clip)
            momentum_into(xp, m, w, step, momentum, (one - momentum) * wd, a[:n])
            s = sign(xp, m, a[:n], b[:n])
            s *= lr
            w *= decay
            w += s
