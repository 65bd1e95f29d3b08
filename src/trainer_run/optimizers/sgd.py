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
from .array_ops import momentum_into, scaled_step
from .optimizer import Optimizer, register, scalars
from .scalar_ops import momentum as momentum_one
from .scalar_ops import scaled_step as scaled_step_one
from .workspace import Workspace, chunks


def _sgd_loop(w, g, m, lr, wd, momentum, rescale, clip, clipping, with_momentum):
    one = w.dtype.type(1)
    for i in prange(w.size):
        step = scaled_step_one(g[i], lr, rescale, clip, clipping)
        if with_momentum:
            mi = momentum_one(m[i], w[i], step, momentum, lr * wd)
            m[i] = mi
            w[i] = w[i] + mi
        else:
            w[i] = (one - lr * wd) * w[i] - step


_sgd_kernel = jit.kernel(_sgd_loop)


class MomentumOptimizer(Optimizer):
    """Base of the SGD family (SGD, NAG, Signum, LARS, LBSGD): ``momentum`` in [0, 1] and a
    state of one momentum buffer like the weight, None when ``momentum`` is 0."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_number("momentum", momentum, low=0, high=1)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return array_module(weight).zeros_like(weight)


@register
class SGD(MomentumOptimizer):
    """SGD with optional momentum; see the module docstring for the update rule."""

    master_first = False  # MXNet's SGD keeps ``(state, master)``

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(momentum=momentum, **kwargs)
        self.lazy_update = bool(lazy_update)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, rescale = scalars(weight.dtype, lr, wd, self.momentum, rescale_grad)
        xp = array_module(weight)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        if jit.usable(_sgd_kernel, weight, grad, *([] if state is None else [state])):
            jit.launch(_sgd_kernel, weight.size, weight, grad, weight if state is None else state, lr,
                       wd, momentum, rescale, clip if clip is not None else lr, clip is not None,
                       state is not None)
            return
        a, b = self._workspace.get(weight, 2)
        if state is None:
            decay = 1 - lr * wd
            for n, (w, g) in chunks(weight, grad):
                step = scaled_step(xp, a[:n], g, lr, rescale, clip)
                if wd:
                    w *= decay
                w -= step
            return
        for n, (w, g, m) in chunks(weight, grad, state):
            step = scaled_step(xp, a[:n], g, lr, rescale, clip)
            w += momentum_into(xp, m, w, step, momentum, lr * wd if wd else None, b[:n])
