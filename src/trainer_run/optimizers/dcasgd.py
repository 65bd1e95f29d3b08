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
gradient to 0), through MXNet's ``clip`` operator (see :func:`.nag.clip_op`).
"""

from __future__ import annotations

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import mx_clip
from .optimizer import Optimizer, register, scalars
from .scalar_ops import mx_clip as clip_one
from .workspace import Workspace, chunks


def _dcasgd_loop(w, g, p, m, lr, wd, momentum, lamda, rescale, clip, clipping, with_momentum):
    for i in prange(w.size):
        gi = g[i] * rescale
        if clipping:
            gi = clip_one(gi, clip)
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

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        lr, wd, momentum, lamda, rescale = scalars(
            weight.dtype, self._get_lr(index), self._get_wd(index), self.momentum, self.lamda,
            self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        g = grad * rescale
        if self.clip_gradient is not None:
            mx_clip(xp, g, weight.dtype.type(self.clip_gradient), out=g)
        mom, previous_weight = state
        step = -lr * (g + wd * weight + lamda * g * g * (weight - previous_weight))
        if mom is not None:
            mom *= momentum
            mom += step
            step = mom
        previous_weight[...] = weight
        weight += step

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, lamda, rescale = scalars(weight.dtype, lr, wd, self.momentum,
                                                   self.lamda, rescale_grad)
        xp = array_module(weight)
        clip = weight.dtype.type(self.clip_gradient) if self.clip_gradient is not None else None
        mom, previous = state
        moms = () if mom is None else (mom,)
        if jit.usable(_dcasgd_kernel, weight, grad, previous, *moms):
            jit.launch(_dcasgd_kernel, weight.size, weight, grad, previous,
                       previous if mom is None else mom, lr, wd, momentum, lamda, rescale,
                       clip if clip is not None else lr, clip is not None, mom is not None)
            return
        a, b, c = self._workspace.get(weight, 3)
        for n, (w, gr, p, *m) in chunks(weight, grad, previous, *moms):
            g, t, d = a[:n], b[:n], c[:n]
            xp.multiply(gr, rescale, out=g)
            if clip is not None:
                mx_clip(xp, g, clip, out=g)
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
