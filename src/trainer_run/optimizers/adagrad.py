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
that operator's result for ``a_min > a_max`` (see :func:`ndarray_clip`). This differs from
the fused C++ kernels (SGD, Adam, RMSProp, ...) where 0 or a negative value turns clipping
off. AdaDelta, Adamax and Nadam share this rule and the helpers below.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import mx_clip
from .optimizer import Optimizer, python_clip, register, scalars
from .workspace import Workspace, chunks


def _adagrad_loop(w, g, h, neg_lr, wd, eps, rescale, clip, clipping):
    for i in prange(w.size):
        gi = g[i] * rescale
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        hi = h[i] + gi * gi
        h[i] = hi
        div = gi / numpy.sqrt(hi + eps)
        w[i] = w[i] + (div + w[i] * wd) * neg_lr


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

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        lr, wd, eps, rescale = scalars(weight.dtype, self._get_lr(index), self._get_wd(index),
                                       self.float_stable_eps, self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        history = state
        g = grad * rescale
        clipping, clip = python_clip(self, weight.dtype)
        if clipping:
            g = mx_clip(xp, g, clip)
        history += g * g
        div = g / xp.sqrt(history + eps)
        weight += (div + weight * wd) * -lr

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, eps, rescale = scalars(weight.dtype, lr, wd, self.float_stable_eps,
                                       rescale_grad)
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        history = state
        if jit.usable(_adagrad_kernel, weight, grad, history):
            jit.launch(_adagrad_kernel, weight.size, weight, grad, history, -lr, wd, eps, rescale,
                            clip if clipping else lr, clipping)
            return
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, h) in chunks(weight, grad, history):
            g, t = a[:n], b[:n]
            xp.multiply(gr, rescale, out=g)
            if clipping:
                mx_clip(xp, g, clip, out=g)
            xp.multiply(g, g, out=t)
            h += t
            xp.add(h, eps, out=t)
            xp.sqrt(t, out=t)
            g /= t                      # div
            xp.multiply(w, wd, out=t)
            g += t
            g *= -lr
            w += g
