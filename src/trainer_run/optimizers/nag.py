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
operator (:func:`.array_ops.mx_clip`).
"""

from __future__ import annotations

from .. import jit
from ..backend import array_module
from ..jit import prange
from .array_ops import decayed_after_clip
from .optimizer import python_clip, register, scalars
from .scalar_ops import decayed_after_clip as decayed_after_clip_one
from .sgd import MomentumOptimizer
from .workspace import chunks


def _nag_loop(w, g, m, lr, wd, momentum, rescale, clip, clipping, with_momentum):
    for i in prange(w.size):
        gi = decayed_after_clip_one(g[i], w[i], rescale, wd, clip, clipping)
        if with_momentum:
            mi = m[i] * momentum + gi
            m[i] = mi
            gi = gi + mi * momentum
        w[i] = w[i] + gi * -lr


_nag_kernel = jit.kernel(_nag_loop)


@register
class NAG(MomentumOptimizer):
    """Nesterov accelerated SGD; see the module docstring for the update rule."""

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, momentum, rescale = scalars(weight.dtype, lr, wd, self.momentum, rescale_grad)
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        moms = () if state is None else (state,)
        if jit.usable(_nag_kernel, weight, grad, *moms):
            jit.launch(_nag_kernel, weight.size, weight, grad, weight if state is None else state,
                       lr, wd, momentum, rescale, clip if clipping else lr, clipping,
                       state is not None)
            return
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, *m) in chunks(weight, grad, *moms):
            g = decayed_after_clip(xp, a[:n], b[:n], gr, w, rescale, wd, clip)
            if m:
                (m,) = m
                m *= momentum
                m += g
                xp.multiply(m, momentum, out=b[:n])
                g += b[:n]
            g *= -lr
            w += g
