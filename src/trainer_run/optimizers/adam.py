"""Adam (MXNet ``adam_update``), with MXNet's bias correction folded into the rate.

Per update ``t`` of an index (its own update count)::

    lr_t  = lr * sqrt(1 - beta2**t) / (1 - beta1**t)
    g     = clip(rescale_grad * grad + wd * weight, clip_gradient)
    mean  = beta1 * mean + (1 - beta1) * g
    var   = beta2 * var + (1 - beta2) * g * g
    weight = weight - lr_t * mean / (sqrt(var) + epsilon)

Weight decay is added to the gradient before clipping (unlike SGD, which clips first).
"""

from __future__ import annotations

import math

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check, check_number
from ..jit import prange
from .array_ops import average_into, decayed, square_average_into
from .optimizer import Optimizer, register, scalars
from .scalar_ops import decayed as decayed_one
from .workspace import Workspace, chunks


def _adam_loop(w, g, m, v, lr, wd, beta1, beta2, eps, rescale, clip, clipping):
    one = w.dtype.type(1)
    for i in prange(w.size):
        gi = decayed_one(g[i], w[i], rescale, wd, clip, clipping)
        mi = m[i] * beta1 + gi * (one - beta1)
        vi = v[i] * beta2 + gi * (one - beta2) * gi
        m[i] = mi
        v[i] = vi
        w[i] = w[i] - lr * mi / (numpy.sqrt(vi) + eps)


_adam_kernel = jit.kernel(_adam_loop)


@register
class Adam(Optimizer):
    """Adam; see the module docstring for the update rule."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = check_number("beta1", beta1, low=0, high=1)
        check(self.beta1 < 1, f"beta1 must be < 1, got {beta1!r} (lr_t divides by 1 - beta1**t)")
        self.beta2 = check_number("beta2", beta2, low=0, high=1)
        check(self.beta2 < 1, f"beta2 must be < 1, got {beta2!r} (lr_t would be lr * sqrt(1 - 1) = 0 "
              "at every update)")
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self.lazy_update = bool(lazy_update)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)

    def _corrected_lr(self, lr, t):
        return lr * math.sqrt(1.0 - self.beta2**t) / (1.0 - self.beta1**t)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr = self._corrected_lr(lr, count)
        lr, wd, beta1, beta2, eps, rescale = scalars(
            weight.dtype, lr, wd, self.beta1, self.beta2, self.epsilon, rescale_grad)
        one = weight.dtype.type(1)
        xp = array_module(weight)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        mean, var = state
        if jit.usable(_adam_kernel, weight, grad, mean, var):
            jit.launch(_adam_kernel, weight.size, weight, grad, mean, var, lr, wd, beta1, beta2,
                       eps, rescale, clip if clip is not None else one, clip is not None)
            return
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, m, v) in chunks(weight, grad, mean, var):
            g, t = decayed(xp, a[:n], b[:n], gr, w, rescale, wd, clip), b[:n]
            average_into(xp, m, g, beta1, one - beta1, t)
            square_average_into(xp, v, g, beta2, one - beta2, t)
            xp.sqrt(v, out=t)
            t += eps
            xp.multiply(m, lr, out=g)
            g /= t
            w -= g
