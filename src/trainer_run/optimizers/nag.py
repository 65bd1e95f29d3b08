"""Nesterov accelerated SGD (MXNet ``NAG``, the Python-side update of the seed text).

With momentum (``state`` holds the momentum, not scaled by the learning rate)::

    g      = clip(rescale_grad * grad, clip_gradient)
    state  = momentum * state + g + wd * weight
    weight = weight - lr * (g + wd * weight + momentum * state)

Without momentum::

    weight = weight - lr * (clip(rescale_grad * grad, clip_gradient) + wd * weight)

The update follows the seed's Python code operation for operation (``mom *= momentum;
g += wd * weight; mom += g; g += momentum * mom; weight += -lr * g``). MXNet 1.9.1 runs
the same algebra in its ``nag_mom_update`` kernel, whose state is the momentum already
multiplied by the learning rate (so the two differ when the learning rate changes between
steps) and whose multi-precision state is ``(momentum, master)``; here the state and the
multi-precision layout ``(master, momentum)`` are the seed's.

Like the other Python-side optimizers of MXNet, clipping is applied whenever
``clip_gradient is not None`` (0 clips every gradient to 0), through MXNet's ``clip``
operator (:func:`clip_op`).
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


def _nag_loop(w, g, m, lr, wd, momentum, rescale, clip, clipping, with_momentum):
    for i in prange(w.size):
        gi = g[i] * rescale
        if clipping:
            gi = clip_one(gi, clip)
        gi = gi + w[i] * wd
        if with_momentum:
            mi = m[i] * momentum + gi
            m[i] = mi
            gi = gi + mi * momentum
        w[i] = w[i] + gi * -lr


_nag_kernel = jit.kernel(_nag_loop)


@register
class NAG(Optimizer):
    """Nesterov accelerated SGD; see the module docstring for the update rule."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_number("momentum", momentum, low=0, high=1)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return array_module(weight).zeros_like(weight)

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        lr, wd, momentum, rescale = scalars(weight.dtype, self._get_lr(index), self._get_wd(index),
                                            self.momentum, self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        g = grad * rescale
        if self.clip_gradient is not None:
            mx_clip(xp, g, weight.dtype.type(self.clip_gradient), out=g)
        if state is None:
            weight += -lr * (g + wd * weight)
            return
        state *= momentum
        g += wd * weight
        state += g
        g += momentum * state
        weight += -lr * g

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, rescale = scalars(weight.dtype, lr, wd, self.momentum, rescale_grad)
        xp = array_module(weight)
        clip = weight.dtype.type(self.clip_gradient) if self.clip_gradient is not None else None
        moms = () if state is None else (state,)
        if jit.usable(_nag_kernel, weight, grad, *moms):
            jit.launch(_nag_kernel, weight.size, weight, grad, weight if state is None else state,
                       lr, wd, momentum, rescale, clip if clip is not None else lr,
                       clip is not None, state is not None)
            return
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, *m) in chunks(weight, grad, *moms):
            g, t = a[:n], b[:n]
            xp.multiply(gr, rescale, out=g)
            if clip is not None:
                mx_clip(xp, g, clip, out=g)
            xp.multiply(w, wd, out=t)
            if state is None:
                g += t
            else:
                (m,) = m
                m *= momentum
                g += t
                m += g
                xp.multiply(m, momentum, out=t)
                g += t
            g *= -lr
            w += g
