"""AdaGrad (MXNet 1.9 ``AdaGrad``, dense path: NDArray arithmetic in Python).

Per update::

    g       = clip(rescale_grad * grad, clip_gradient)
    history = history + g * g
    div     = g / sqrt(history + eps)
    weight  = weight + (div + weight * wd) * -lr

Source: ``mxnet/optimizer/optimizer.py`` (1.x), ``AdaGrad.update``, branch for dense
gradients; each Python scalar is cast to the weight's dtype as NDArray scalar operators do.
The constructor argument is ``eps`` and is stored as ``float_stable_eps`` (MXNet's names).

Clipping follows the Python code, which tests ``clip_gradient is not None`` and calls the
``clip`` operator: ``clip_gradient=0`` zeroes the gradient, and a negative value gives
that operator's result for ``a_min > a_max`` (see :func:`.array_ops.mx_clip`). This differs
from the fused C++ kernels (SGD, Adam, RMSProp, ...) where 0 or a negative value turns
clipping off. AdaDelta, Adamax and Nadam share this rule (:func:`.optimizer.python_clip`).
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import rescaled
from .optimizer import Optimizer, python_clip, register, scalars
from .scalar_ops import rescaled as rescaled_one
from .workspace import Workspace, chunks


def _adagrad_loop(w, g, h, neg_lr, wd, eps, rescale, clip, clipping):
    for i in prange(w.size):
        gi = rescaled_one(g[i], rescale, clip, clipping)
        hi = h[i] + gi * gi
        h[i] = hi
        w[i] = w[i] + (gi / numpy.sqrt(hi + eps) + w[i] * wd) * neg_lr


_adagrad_kernel = jit.kernel(_adagrad_loop)


@register
class AdaGrad(Optimizer):
    """AdaGrad; see the module docstring for the update rule."""

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = check_number("eps", eps, low=0)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        return array_module(weight).zeros_like(weight)  # history

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, eps, rescale = scalars(weight.dtype, lr, wd, self.float_stable_eps,
                                       rescale_grad)
        clip = python_clip(self, weight.dtype)[1]
        history = state
        if jit.usable(_adagrad_kernel, weight, grad, history):
            jit.launch(_adagrad_kernel, weight.size, weight, grad, history, -lr, wd, eps, rescale,
                       clip if clip is not None else lr, clip is not None)
            return
        xp = array_module(weight)
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, h) in chunks(weight, grad, history):
            g, t = rescaled(xp, a[:n], gr, rescale, clip), b[:n]
            h += xp.multiply(g, g, out=t)
            g /= xp.sqrt(xp.add(h, eps, out=t), out=t)      # div
            g += xp.multiply(w, wd, out=t)
            g *= -lr
            w += g
