"""AdaDelta (MXNet 1.9 ``AdaDelta``: NDArray arithmetic in Python, no learning rate).

Per update::

    g         = clip(rescale_grad * grad, clip_gradient)
    acc_g     = rho * acc_g + (1 - rho) * g * g
    delta     = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g
    acc_delta = rho * acc_delta + (1 - rho) * delta * delta
    weight    = weight - (delta + wd * weight)

Source: ``AdaDelta.update`` in ``mxnet/optimizer/optimizer.py`` (1.x). MXNet's docstring
adds ``wd * weight`` to the gradient as well; its code does not, and the code is followed.
The learning rate (and any scheduler) is not used, as in MXNet. ``1 - rho`` is computed in
double precision and then cast to the weight's dtype, as NDArray scalar operators do.

Clipping follows the Python code (``clip_gradient is not None``; see
:func:`.adagrad.ndarray_clip`). MXNet scales the caller's gradient in place
(``grad *= rescale_grad``); here the gradient is left untouched (same weights and states).
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


def _adadelta_loop(w, g, acc_g, acc_d, wd, rho, one_minus_rho, eps, rescale, clip, clipping):
    for i in prange(w.size):
        gi = g[i] * rescale
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        ag = acc_g[i] * rho + one_minus_rho * gi * gi
        acc_g[i] = ag
        delta = numpy.sqrt(acc_d[i] + eps) / numpy.sqrt(ag + eps) * gi
        acc_d[i] = acc_d[i] * rho + one_minus_rho * delta * delta
        w[i] = w[i] - (delta + w[i] * wd)


_adadelta_kernel = jit.kernel(_adadelta_loop)


@register
class AdaDelta(Optimizer):
    """AdaDelta; see the module docstring for the update rule."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = check_number("rho", rho, low=0, high=1)
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)  # accumulated g, accumulated delta

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        wd, rho, one_minus_rho, eps, rescale = scalars(
            weight.dtype, self._get_wd(index), self.rho, 1.0 - self.rho, self.epsilon,
            self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        g = grad * rescale
        clipping, clip = python_clip(self, weight.dtype)
        if clipping:
            g = mx_clip(xp, g, clip)
        acc_g, acc_delta = state
        acc_g *= rho
        acc_g += one_minus_rho * g * g
        delta = xp.sqrt(acc_delta + eps) / xp.sqrt(acc_g + eps) * g
        acc_delta *= rho
        acc_delta += one_minus_rho * delta * delta
        weight -= delta + wd * weight

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        wd, rho, one_minus_rho, eps, rescale = scalars(
            weight.dtype, wd, self.rho, 1.0 - self.rho, self.epsilon, rescale_grad)
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        acc_g, acc_delta = state
        if jit.usable(_adadelta_kernel, weight, grad, acc_g, acc_delta):
            jit.launch(_adadelta_kernel, weight.size, weight, grad, acc_g, acc_delta, wd, rho,
                       one_minus_rho, eps, rescale, clip if clipping else rho, clipping)
            return
        a, b, c = self._workspace.get(weight, 3)
        for n, (w, gr, ag, ad) in chunks(weight, grad, acc_g, acc_delta):
            g, t, u = a[:n], b[:n], c[:n]
            xp.multiply(gr, rescale, out=g)
            if clipping:
                mx_clip(xp, g, clip, out=g)
            xp.multiply(g, one_minus_rho, out=t)
            t *= g
            ag *= rho
            ag += t
            xp.add(ad, eps, out=t)
            xp.sqrt(t, out=t)
            xp.add(ag, eps, out=u)
            xp.sqrt(u, out=u)
            t /= u
            t *= g                      # delta
            xp.multiply(t, one_minus_rho, out=u)
            u *= t
            ad *= rho
            ad += u
            xp.multiply(w, wd, out=u)
            u += t
            w -= u
