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
from .optimizer import Optimizer, register, scalars
from .workspace import Workspace, chunks


def _adam_loop(w, g, m, v, lr, wd, beta1, beta2, eps, rescale, clip, clipping):
    one = w.dtype.type(1)
    for i in prange(w.size):
        gi = g[i] * rescale + w[i] * wd
        if clipping:
            gi = min(max(gi, -clip), clip)
        mi = beta1 * m[i] + (one - beta1) * gi
        vi = beta2 * v[i] + (one - beta2) * gi * gi
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

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        t = self._index_update_count[index]
        lr = self._corrected_lr(self._get_lr(index), t)
        lr, wd, beta1, beta2, eps, rescale = scalars(
            weight.dtype, lr, self._get_wd(index), self.beta1, self.beta2, self.epsilon,
            self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        mean, var = state
        g = grad * rescale + weight * wd
        if self.clipping:
            clip = weight.dtype.type(self.clip_gradient)
            g = xp.clip(g, -clip, clip)
        mean[...] = beta1 * mean + (1 - beta1) * g
        var[...] = beta2 * var + (1 - beta2) * g * g
        weight[...] = weight - lr * mean / (xp.sqrt(var) + eps)

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
            g, t = a[:n], b[:n]
            xp.multiply(gr, rescale, out=g)
            if wd:
                xp.multiply(w, wd, out=t)
                g += t
            if clip is not None:
                xp.clip(g, -clip, clip, out=g)
            m *= beta1
            xp.multiply(g, one - beta1, out=t)
            m += t
            v *= beta2
            xp.multiply(g, one - beta2, out=t)
            t *= g
            v += t
            xp.sqrt(v, out=t)
            t += eps
            xp.multiply(m, lr, out=g)
            g /= t
            w -= g
