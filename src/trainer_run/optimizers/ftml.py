"""FTML, Follow the Moving Leader (MXNet ``ftml_update``), state ``(d, v, z)``.

Per update ``t`` of an index (its own update count)::

    g      = clip(rescale_grad * grad + wd * weight, clip_gradient)
    v      = beta2 * v + (1 - beta2) * (g * g)
    d_t    = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)
    z      = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d) * weight
    d      = d_t
    weight = -z / d_t

Sources: ``FTML.update`` in ``mxnet/optimizer/optimizer.py`` (1.x: ``t`` is the index's own
count; ``clip_grad`` passed only when ``clip_gradient`` is truthy) and ``FTMLKernel`` in
``src/operator/optimizer_op-inl.h`` (clips when the bound is >= 0; ``t`` and every scalar,
the powers included, in the weight's dtype).
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import average_into, decayed_always, mean_square_into
from .optimizer import Optimizer, below_one, register, scalars
from .scalar_ops import average as average_one
from .scalar_ops import decayed as decayed_one
from .scalar_ops import mean_square as mean_square_one
from .workspace import Workspace, chunks


def _ftml_loop(w, g, d, v, z, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, rescale,
               d_scale, v_div, clip, clipping):
    for i in prange(w.size):
        gi = decayed_one(g[i], w[i], rescale, wd, clip, clipping)
        vi = mean_square_one(v[i], gi, beta2, one_minus_beta2)
        d_t = d_scale * (numpy.sqrt(vi / v_div) + eps)
        zi = average_one(z[i], gi, beta1, one_minus_beta1) - (d_t - beta1 * d[i]) * w[i]
        v[i] = vi
        z[i] = zi
        d[i] = d_t
        w[i] = -zi / d_t


_ftml_kernel = jit.kernel(_ftml_loop)


def _ftml_arrays(xp, workspace, weight, grad, d, v, z, wd, beta1, one_minus_beta1, beta2,
                 one_minus_beta2, eps, rescale, d_scale, v_div, clip):
    """:func:`_ftml_loop` on arrays, chunk by chunk, with scratch from ``workspace``
    (``clip``: a bound or None)."""
    a, b = workspace.get(weight, 2)
    for n, (w, gr, dd, vv, zz) in chunks(weight, grad, d, v, z):
        g, t = decayed_always(xp, a[:n], b[:n], gr, w, rescale, wd, clip), b[:n]
        mean_square_into(xp, vv, g, beta2, one_minus_beta2, t)
        xp.sqrt(xp.divide(vv, v_div, out=t), out=t)
        t += eps
        t *= d_scale                # d_t
        average_into(xp, zz, g, beta1, one_minus_beta1, g)
        dd *= beta1
        xp.subtract(t, dd, out=dd)  # d_t - beta1 * d
        dd *= w
        zz -= dd
        dd[...] = t
        xp.negative(xp.divide(zz, t, out=w), out=w)


@register
class FTML(Optimizer):
    """FTML; see the module docstring for the update rule."""

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.require_positive_rate("d_t divides by it")
        self.beta1 = below_one("beta1", beta1, "d_t would be 0 and the weight -z / d_t")
        self.beta2 = below_one("beta2", beta2, "v / (1 - beta2**t) would be 0 / 0")
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight), xp.zeros_like(weight)  # d, v, z

    def _scalars(self, dtype, lr, wd, t, rescale_grad):
        """The loops' scalars in ``dtype`` (from ``wd`` to ``v_div``), with
        ``d_scale = (1 - beta1**t) / lr`` and ``v_div = 1 - beta2**t`` computed in ``dtype``
        as the kernel computes them."""
        lr, wd, beta1, beta2, eps, rescale, t = scalars(dtype, lr, wd, self.beta1, self.beta2,
                                                        self.epsilon, rescale_grad, t)
        one = dtype.type(1)
        return (wd, beta1, one - beta1, beta2, one - beta2, eps, rescale,
                (one - beta1**t) / lr, one - beta2**t)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        step = self._scalars(weight.dtype, lr, wd, count, rescale_grad)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        if jit.usable(_ftml_kernel, weight, grad, *state):
            jit.launch(_ftml_kernel, weight.size, weight, grad, *state, *step,
                       clip if clip is not None else weight.dtype.type(0), clip is not None)
            return
        _ftml_arrays(array_module(weight), self._workspace, weight, grad, *state, *step, clip)
