"""AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), on MXNet's ``adamw_update``.

Per update ``t`` of an index (its own update count)::

    eta  = lr * sqrt(1 - beta2**t) / (1 - beta1**t)      (correct_bias=False: eta = lr)
    g    = clip(rescale_grad * grad, clip_gradient)
    mean = beta1 * mean + (1 - beta1) * g
    var  = beta2 * var + (1 - beta2) * g**2
    weight = weight - eta * (mean / (sqrt(var) + epsilon) + wd * weight)

MXNet 1.x has no AdamW optimizer class, only the kernel: ``AdamWUpdate`` /
``MPAdamWKernel`` in ``src/operator/contrib/adamw-inl.h`` (``mx.nd.contrib.adamw_update``,
``weight - eta * (lr * mean / (sqrt(var) + epsilon) + wd * weight)``, no bias correction
of its own). The optimizer around it follows ``mxnet.optimizer.AdamW``
(``python/mxnet/optimizer/adamW.py``: ``learning_rate=0.001, beta1=0.9, beta2=0.999,
epsilon=1e-6, correct_bias=True``), whose fused path calls the kernel with ``lr=1``,
``eta=learning_rate * sqrt(1 - beta2**t) / (1 - beta1**t)`` and ``wd=wd``, exactly as GluonNLP's
``BERTAdam`` calls it with ``lr=1, eta=learning_rate`` (BERTAdam has no bias correction,
like ``correct_bias=False``). So the bias correction scales the decay term too, and
epsilon is not corrected.

As the kernel does, an update whose ``rescale_grad`` is 0 or not finite leaves weight and
states untouched (the update count still advances). A multi-precision state is
``((mean, var), master)``, the layout of MXNet's AdamW and BERTAdam.
"""

from __future__ import annotations

import math

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import average_into, mean_square_into, rescaled
from .optimizer import Optimizer, below_one, register, scalars
from .scalar_ops import average as average_one
from .scalar_ops import mean_square as mean_square_one
from .scalar_ops import rescaled as rescaled_one
from .workspace import Workspace, chunks


def _adamw_loop(w, g, m, v, eta, wd, beta1, beta2, eps, rescale, clip, clipping):
    one = w.dtype.type(1)
    for i in prange(w.size):
        gi = rescaled_one(g[i], rescale, clip, clipping)
        mi = average_one(m[i], gi, beta1, one - beta1)
        vi = mean_square_one(v[i], gi, beta2, one - beta2)
        m[i] = mi
        v[i] = vi
        w[i] = w[i] - eta * (mi / (numpy.sqrt(vi) + eps) + wd * w[i])


_adamw_kernel = jit.kernel(_adamw_loop)


@register
class AdamW(Optimizer):
    """AdamW; see the module docstring for the update rule."""

    master_first = False  # MXNet's AdamW (and BERTAdam) keeps ``(state, master)``

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = below_one("beta1", beta1, "eta divides by 1 - beta1**t; without "
                               "correct_bias the mean would stay 0")
        self.beta2 = below_one("beta2", beta2, "eta would be 0; without correct_bias var would "
                               "stay 0 and the step be mean / epsilon")
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self.correct_bias = bool(correct_bias)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)

    def _eta(self, lr, t):
        if not self.correct_bias:
            return lr
        return lr * math.sqrt(1.0 - self.beta2**t) / (1.0 - self.beta1**t)

    @staticmethod
    def _skipped(rescale_grad) -> bool:
        """adamw_update does nothing when rescale_grad is 0 or not finite."""
        return not math.isfinite(rescale_grad) or rescale_grad == 0

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        if self._skipped(rescale_grad):
            return
        eta, wd, beta1, beta2, eps, rescale = scalars(
            weight.dtype, self._eta(lr, count), wd, self.beta1, self.beta2, self.epsilon,
            rescale_grad)
        one = weight.dtype.type(1)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        mean, var = state
        if jit.usable(_adamw_kernel, weight, grad, mean, var):
            jit.launch(_adamw_kernel, weight.size, weight, grad, mean, var, eta, wd, beta1, beta2,
                       eps, rescale, clip if clip is not None else one, clip is not None)
            return
        xp = array_module(weight)
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, m, v) in chunks(weight, grad, mean, var):
            g, t = rescaled(xp, a[:n], gr, rescale, clip), b[:n]
            average_into(xp, m, g, beta1, one - beta1, t)
            mean_square_into(xp, v, g, beta2, one - beta2, t)
            xp.sqrt(v, out=t)
            t += eps
            xp.divide(m, t, out=g)
            if wd:
                g += xp.multiply(w, wd, out=t)
            g *= eta
            w -= g
