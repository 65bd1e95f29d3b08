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
from .array_ops import decayed_always, mean_square_into, mx_clip
from .optimizer import Optimizer, register, scalars
from .scalar_ops import decayed as decayed_one
from .scalar_ops import mean_square as mean_square_one
from .scalar_ops import mx_clip as mx_clip_one
from .workspace import Workspace, chunks


def _rmsprop_loop(w, g, n, lr, wd, gamma1, one_minus_gamma1, eps, rescale, clip, clipping,
                  clip_w, clipping_w):
    for i in prange(w.size):
        gi = decayed_one(g[i], w[i], rescale, wd, clip, clipping)
        ni = mean_square_one(n[i], gi, gamma1, one_minus_gamma1)
        n[i] = ni
        wi = w[i] - lr * (gi / numpy.sqrt(ni + eps))
        w[i] = mx_clip_one(wi, clip_w) if clipping_w else wi


def _rmspropalex_loop(w, g, n, ga, d, lr, wd, gamma1, one_minus_gamma1, gamma2, eps, rescale,
                      clip, clipping, clip_w, clipping_w):
    for i in prange(w.size):
        gi = decayed_one(g[i], w[i], rescale, wd, clip, clipping)
        share = gi * one_minus_gamma1
        ni = n[i] * gamma1 + share * gi
        gai = ga[i] * gamma1 + share
        di = gamma2 * d[i] - lr * gi / numpy.sqrt(ni - gai * gai + eps)
        n[i] = ni
        ga[i] = gai
        d[i] = di
        wi = w[i] + di
        w[i] = mx_clip_one(wi, clip_w) if clipping_w else wi


_rmsprop_kernel = jit.kernel(_rmsprop_loop)
_rmspropalex_kernel = jit.kernel(_rmspropalex_loop)


def _rmsprop_arrays(xp, workspace, weight, grad, n, lr, wd, gamma1, one_minus_gamma1, eps,
                    rescale, clip, clip_w):
    """:func:`_rmsprop_loop` on arrays, chunk by chunk, with scratch from ``workspace``
    (each clip: a bound or None)."""
    a, b = workspace.get(weight, 2)
    for size, (w, gr, nn) in chunks(weight, grad, n):
        g, t = decayed_always(xp, a[:size], b[:size], gr, w, rescale, wd, clip), b[:size]
        mean_square_into(xp, nn, g, gamma1, one_minus_gamma1, t)
        xp.sqrt(xp.add(nn, eps, out=t), out=t)
        xp.divide(g, t, out=t)
        t *= lr
        w -= t
        if clip_w is not None:
            mx_clip(xp, w, clip_w, out=w)


def _rmspropalex_arrays(xp, workspace, weight, grad, n, g_avg, delta, lr, wd, gamma1,
                        one_minus_gamma1, gamma2, eps, rescale, clip, clip_w):
    """:func:`_rmspropalex_loop` on arrays, chunk by chunk, with scratch from ``workspace``
    (each clip: a bound or None)."""
    a, b, c = workspace.get(weight, 3)
    for size, (w, gr, nn, ga, d) in chunks(weight, grad, n, g_avg, delta):
        t, u = b[:size], c[:size]
        g = decayed_always(xp, a[:size], t, gr, w, rescale, wd, clip)
        xp.multiply(g, one_minus_gamma1, out=t)     # the share of g, as in the loop
        nn *= gamma1
        nn += xp.multiply(t, g, out=u)
        ga *= gamma1
        ga += t
        xp.subtract(nn, xp.multiply(ga, ga, out=u), out=u)
        u += eps
        xp.sqrt(u, out=u)
        xp.multiply(g, lr, out=t)
        t /= u
        d *= gamma2
        d -= t
        w += d
        if clip_w is not None:
            mx_clip(xp, w, clip_w, out=w)


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
        """The loops' scalars in ``dtype`` (``lr`` to ``rescale``, ``gamma2`` only when
        centered) and the bounds of the two clips (None: no clipping)."""
        lr, wd, gamma1, gamma2, eps, rescale = scalars(dtype, lr, wd, self.gamma1, self.gamma2,
                                                       self.epsilon, rescale_grad)
        centered = (gamma2,) if self.centered else ()
        step = (lr, wd, gamma1, dtype.type(1) - gamma1, *centered, eps, rescale)
        clip = dtype.type(self.clip_gradient) if self.clipping else None
        clip_w = dtype.type(self.clip_weights) if self.clipping_weights else None
        return step, clip, clip_w

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        step, clip, clip_w = self._scalars(weight.dtype, lr, wd, rescale_grad)
        kernel, arrays = ((_rmspropalex_kernel, _rmspropalex_arrays) if self.centered
                          else (_rmsprop_kernel, _rmsprop_arrays))
        if jit.usable(kernel, weight, grad, *state):
            one = weight.dtype.type(1)
            jit.launch(kernel, weight.size, weight, grad, *state, *step,
                       clip if clip is not None else one, clip is not None,
                       clip_w if clip_w is not None else one, clip_w is not None)
            return
        arrays(array_module(weight), self._workspace, weight, grad, *state, *step, clip, clip_w)
