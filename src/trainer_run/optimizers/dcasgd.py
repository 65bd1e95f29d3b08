"""Delay-compensated asynchronous SGD (MXNet ``DCASGD``, a Python-side update).

``state`` is ``(momentum or None, previous_weight)``; ``previous_weight`` starts as a copy
of the weight when the state is created::

    g               = clip(rescale_grad * grad, clip_gradient)
    step            = -lr * (g + wd * weight + lamda * g * g * (weight - previous_weight))
    mom             = momentum * mom + step      # without momentum: mom = step
    previous_weight = weight
    weight          = weight + mom

The order of operations is the seed's. With ``momentum > 0`` MXNet 1.x crashes (it tests
the truth value of the momentum NDArray, ``if mom:``); this implements the intended
formula above. Clipping applies whenever ``clip_gradient is not None`` (0 clips every
gradient to 0), through MXNet's ``clip`` operator (:func:`.array_ops.mx_clip`).
"""

from __future__ import annotations

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import rescaled
from .optimizer import Optimizer, python_clip, register, scalars
from .scalar_ops import rescaled as rescaled_one
from .workspace import Workspace, chunks


def _dcasgd_loop(w, g, p, m, lr, wd, momentum, lamda, rescale, clip, clipping, with_momentum):
    for i in prange(w.size):
        gi = rescaled_one(g[i], rescale, clip, clipping)
        wi = w[i]
        step = -lr * (gi + wd * wi + lamda * gi * gi * (wi - p[i]))
        if with_momentum:
            step = m[i] * momentum + step
            m[i] = step
        p[i] = wi
        w[i] = wi + step


_dcasgd_kernel = jit.kernel(_dcasgd_loop)


@register
class DCASGD(Optimizer):
    """DCASGD; see the module docstring for the update rule."""

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_number("momentum", momentum, low=0, high=1)
        self.lamda = check_number("lamda", lamda)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        mom = None if self.momentum == 0.0 else xp.zeros_like(weight)
        return (mom, weight.copy())                      # (momentum, previous weight)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, lamda, rescale = scalars(weight.dtype, lr, wd, self.momentum,
                                                   self.lamda, rescale_grad)
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        mom, previous = state
        moms = () if mom is None else (mom,)
        if jit.usable(_dcasgd_kernel, weight, grad, previous, *moms):
            jit.launch(_dcasgd_kernel, weight.size, weight, grad, previous,
                       previous if mom is None else mom, lr, wd, momentum, lamda, rescale,
                       clip if clipping else lr, clipping, mom is not None)
            return
        a, b, c = self._workspace.get(weight, 3)
        for n, (w, gr, p, *m) in chunks(weight, grad, previous, *moms):
            g, t, d = rescaled(xp, a[:n], gr, rescale, clip), b[:n], c[:n]
            xp.multiply(w, wd, out=t)
            t += g                                        # g + wd * weight
            xp.multiply(g, lamda, out=d)
            d *= g                                        # lamda * g * g
            xp.subtract(w, p, out=p)                      # p is overwritten below anyway
            d *= p
            t += d
            t *= -lr                                      # step
            if m:
                (m,) = m
                m *= momentum
                m += t
                t = m
            p[...] = w
            w += t
