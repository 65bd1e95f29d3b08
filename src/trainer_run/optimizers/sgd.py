"""SGD with momentum and weight decay (MXNet ``sgd_update`` / ``sgd_mom_update``).

Without momentum::

    weight = (1 - lr * wd) * weight - lr * clip(rescale_grad * grad, clip_gradient)

With momentum (``state`` holds the negative of the velocity, as in MXNet's kernel)::

    state  = momentum * state - lr * wd * weight - lr * clip(rescale_grad * grad, clip_gradient)
    weight = weight + state

Without clipping MXNet multiplies ``(lr * rescale_grad) * grad``; both paths here keep
that association. ``lazy_update`` is accepted for MXNet compatibility; gradients are
always dense here, so it changes nothing.
"""

from __future__ import annotations

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .optimizer import Optimizer, register, scalars
from .workspace import Workspace, chunks


def _sgd_loop(w, g, m, lr, wd, momentum, rescale, clip, clipping, with_momentum):
    one = w.dtype.type(1)
    for i in prange(w.size):
        if clipping:
            step = lr * min(max(rescale * g[i], -clip), clip)
        else:
            step = (lr * rescale) * g[i]
        if with_momentum:
            mi = momentum * m[i] - (lr * wd) * w[i] - step
            m[i] = mi
            w[i] = w[i] + mi
        else:
            w[i] = (one - lr * wd) * w[i] - step


_sgd_kernel = jit.kernel(_sgd_loop)


@register
class SGD(Optimizer):
    """SGD with optional momentum; see the module docstring for the update rule."""

    master_first = False  # MXNet's SGD keeps ``(state, master)``

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_number("momentum", momentum, low=0, high=1)
        self.lazy_update = bool(lazy_update)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return array_module(weight).zeros_like(weight)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, rescale = scalars(weight.dtype, lr, wd, self.momentum, rescale_grad)
        xp = array_module(weight)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        if jit.usable(_sgd_kernel, weight, grad, *([] if state is None else [state])):
            jit.launch(_sgd_kernel, weight.size, weight, grad, weight if state is None else state, lr,
                       wd, momentum, rescale, clip if clip is not None else lr, clip is not None,
                       state is not None)
            return
        (tmp,) = self._workspace.get(weight, 1)
        if state is None:
            decay = 1 - lr * wd
            for n, (w, g) in chunks(weight, grad):
                t = _scaled_step(xp, g, lr, rescale, clip, tmp[:n])
                if wd:
                    w *= decay
                w -= t
            return
        for n, (w, g, m) in chunks(weight, grad, state):
            m *= momentum
            if wd:
                xp.multiply(w, lr * wd, out=tmp[:n])
                m -= tmp[:n]
            m -= _scaled_step(xp, g, lr, rescale, clip, tmp[:n])
            w += m


def _scaled_step(xp, g, lr, rescale, clip, out):
    """``lr * clip(rescale * g)`` or, unclipped, ``(lr * rescale) * g``, into ``out``."""
    if clip is None:
        return xp.multiply(g, lr * rescale, out=out)
    xp.multiply(g, rescale, out=out)
    xp.clip(out, -clip, clip, out=out)
    out *= lr
    return out
