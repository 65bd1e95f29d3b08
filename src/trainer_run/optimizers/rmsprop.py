"""RMSProp, plain (MXNet ``rmsprop_update``) and centered (``rmspropalex_update``).

Both start from ``g = clip(rescale_grad * grad + wd * weight, clip_gradient)`` (weight
decay before clipping). Plain (Tieleman & Hinton), state ``(n,)``::

    n      = (1 - gamma1) * (g * g) + gamma1 * n
    weight = weight - lr * (g / sqrt(n + epsilon))

Centered (Graves 2013), state ``(n, g_avg, delta)``::

    n      = (1 - gamma1) * g * g + gamma1 * n
    g_avg  = (1 - gamma1) * g + gamma1 * g_avg
    delta  = gamma2 * delta - lr * g / sqrt(n - g_avg * g_avg + epsilon)
    weight = weight + delta

and then, with ``clip_weights``, ``weight = clip(weight, clip_weights)``.

Sources: ``RMSProp.update`` in ``mxnet/optimizer/optimizer.py`` (1.x: ``clip_gradient`` and
``clip_weights`` are passed only when truthy) and ``RMSPropUpdateKernel`` /
``RMSPropAlexUpdateKernel`` in ``src/operator/optimizer_op-inl.h`` (each clip applies when
its bound is >= 0; every scalar, ``1 - gamma1`` included, is computed in the weight's
dtype). So ``clip_gradient`` and ``clip_weights`` act when truthy and >= 0.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .optimizer import Optimizer, register, scalars
from .workspace import Workspace, chunks


def _rmsprop_loop(w, g, n, lr, wd, gamma1, one_minus_gamma1, eps, rescale, clip, clipping,
                  clip_w, clipping_w):
    for i in prange(w.size):
        gi = rescale * g[i] + wd * w[i]
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        ni = one_minus_gamma1 * (gi * gi) + gamma1 * n[i]
        n[i] = ni
        wi = w[i] - lr * (gi / numpy.sqrt(ni + eps))
        if clipping_w:
            if wi > clip_w:
                wi = clip_w
            elif wi < -clip_w:
                wi = -clip_w
        w[i] = wi


def _rmspropalex_loop(w, g, n, ga, d, lr, wd, gamma1, one_minus_gamma1, gamma2, eps, rescale,
                      clip, clipping, clip_w, clipping_w):
    for i in prange(w.size):
        gi = rescale * g[i] + wd * w[i]
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        ni = one_minus_gamma1 * gi * gi + gamma1 * n[i]
        gai = one_minus_gamma1 * gi + gamma1 * ga[i]
        di = gamma2 * d[i] - lr * gi / numpy.sqrt(ni - gai * gai + eps)
        n[i] = ni
        ga[i] = gai
        d[i] = di
        wi = w[i] + di
        if clipping_w:
            if wi > clip_w:
                wi = clip_w
            elif wi < -clip_w:
                wi = -clip_w
        w[i] = wi


_rmsprop_kernel = jit.kernel(_rmsprop_loop)
_rmspropalex_kernel = jit.kernel(_rmspropalex_loop)


@register
class RMSProp(Optimizer):
    """RMSProp (``centered=False``) or Graves' centered RMSProp; see the module docstring."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8, centered=False,
                 clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = check_number("gamma1", gamma1, low=0, high=1)
        self.gamma2 = check_number("gamma2", gamma2, low=0, high=1)
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self.centered = bool(centered)
        if clip_weights is not None:
            clip_weights = check_number("clip_weights", clip_weights)
        self.clip_weights = clip_weights
        self._workspace = Workspace()

    @property
    def clipping_weights(self) -> bool:
        """Whether weights are clipped (MXNet: ``clip_weights`` truthy and >= 0)."""
        return bool(self.clip_weights) and self.clip_weights >= 0

    def create_state(self, index, weight):
        xp = array_module(weight)
        if self.centered:
            return xp.zeros_like(weight), xp.zeros_like(weight), xp.zeros_like(weight)  # n, g, delta
        return (xp.zeros_like(weight),)  # n

    def _scalars(self, dtype, lr, wd, rescale_grad):
        lr, wd, gamma1, gamma2, eps, rescale = scalars(dtype, lr, wd, self.gamma1, self.gamma2,
                                                       self.epsilon, rescale_grad)
        clip = dtype.type(self.clip_gradient) if self.clipping else None
        clip_w = dtype.type(self.clip_weights) if self.clipping_weights else None
        return lr, wd, gamma1, gamma2, eps, rescale, clip, clip_w

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        lr, wd, gamma1, gamma2, eps, rescale, clip, clip_w = self._scalars(
            weight.dtype, self._get_lr(index), self._get_wd(index), self.grad_rescale(rescale_grad))
        one = weight.dtype.type(1)
        xp = array_module(weight)
        g = rescale * grad + wd * weight
        if clip is not None:
            g = xp.clip(g, -clip, clip)
        if not self.centered:
            (n,) = state
            n[...] = (one - gamma1) * (g * g) + gamma1 * n
            new = weight - lr * (g / xp.sqrt(n + eps))
        else:
            n, g_avg, delta = state
            n[...] = (one - gamma1) * g * g + gamma1 * n
            g_avg[...] = (one - gamma1) * g + gamma1 * g_avg
            delta[...] = gamma2 * delta - lr * g / xp.sqrt(n - g_avg * g_avg + eps)
            new = weight + delta
        if clip_w is not None:
            new = xp.clip(new, -clip_w, clip_w)
        weight[...] = new

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, gamma1, gamma2, eps, rescale, clip, clip_w = self._scalars(weight.dtype, lr, wd, rescale_grad)
        one = weight.dtype.type(1)
        xp = array_module(weight)
        flags = (clip if clip is not None else one, clip is not None,
                 clip_w if clip_w is not None else one, clip_w is not None)
        if not self.centered:
            (n,) = state
            if jit.usable(_rmsprop_kernel, weight, grad, n):
                jit.launch(_rmsprop_kernel, weight.size, weight, grad, n, lr, wd, gamma1, one - gamma1,
                           eps, rescale, *flags)
                return
            a, b = self._workspace.get(weight, 2)
            for size, (w, gr, nn) in chunks(weight, grad, n):
                g, t = a[:size], b[:size]
                _clipped_grad(xp, gr, w, rescale, wd, clip, g, t)
                xp.multiply(g, g, out=t)
                t *= one - gamma1
                nn *= gamma1
                nn += t
                xp.add(nn, eps, out=t)
                xp.sqrt(t, out=t)
                xp.divide(g, t, out=t)
                t *= lr
                w -= t
                if clip_w is not None:
                    xp.clip(w, -clip_w, clip_w, out=w)
            return
        n, g_avg, delta = state
        if jit.usable(_rmspropalex_kernel, weight, grad, n, g_avg, delta):
            jit.launch(_rmspropalex_kernel, weight.size, weight, grad, n, g_avg, delta, lr, wd, gamma1,
                       one - gamma1, gamma2, eps, rescale, *flags)
            return
        a, b, c = self._workspace.get(weight, 3)
        for size, (w, gr, nn, ga, d) in chunks(weight, grad, n, g_avg, delta):
            g, t, u = a[:size], b[:size], c[:size]
            _clipped_grad(xp, gr, w, rescale, wd, clip, g, t)
            xp.multiply(g, one - gamma1, out=t)     # (1 - gamma1) * g
            xp.multiply(t, g, out=u)
            nn *= gamma1
            nn += u
            ga *= gamma1
            ga += t
            xp.multiply(ga, ga, out=u)
            xp.subtract(nn, u, out=u)
            u += eps
            xp.sqrt(u, out=u)
            xp.multiply(g, lr, out=t)
            t /= u
            d *= gamma2
            d -= t
            w += d
            if clip_w is not None:
                xp.clip(w, -clip_w, clip_w, out=w)


def _clipped_grad(xp, grad, weight, rescale, wd, clip, out, tmp):
    """``clip(rescale * grad + wd * weight)`` into ``out`` (``tmp`` is scratch)."""
    xp.multiply(grad, rescale, out=out)
    xp.multiply(weight, wd, out=tmp)
    out += tmp
    if clip is not None:
        xp.clip(out, -clip, clip, out=out)
    return out
