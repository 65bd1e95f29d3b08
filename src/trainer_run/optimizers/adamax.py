"""Adamax (MXNet 1.9 ``Adamax``: NDArray arithmetic in Python), state ``(m, u)``.

Per update ``t`` of an index (its own update count)::

    lr_t   = lr / (1 - beta1**t)
    g      = clip(rescale_grad * grad + wd * weight, clip_gradient)
    m      = beta1 * m + (1 - beta1) * g
    u      = maximum(beta2 * u, abs(g))
    weight = weight - lr_t * m / u

Source: ``Adamax.update`` in ``mxnet/optimizer/optimizer.py`` (1.x). ``lr_t`` and
``1 - beta1`` are computed in double precision and cast to the weight's dtype. Clipping
follows the Python code (``clip_gradient is not None``; see :func:`.adagrad.ndarray_clip`).

One deviation: an entry whose gradient has been exactly zero at every update so far (a
dead ReLU unit, an unused row) has ``m = u = 0``, and MXNet's ``m / u`` turns its weight
into NaN, which then spreads through the model. Here ``u`` is raised to the dtype's
smallest subnormal number for the division only, so such an entry does not move
(``0 / tiny = 0``); every other entry (``u >= tiny``) gets MXNet's value exactly.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check, check_number
from ..jit import prange
from .array_ops import mx_clip
from .optimizer import Optimizer, python_clip, register, scalars
from .workspace import Workspace, chunks


def _adamax_loop(w, g, m, u, lr, wd, beta1, one_minus_beta1, beta2, rescale, tiny, clip,
                 clipping):
    for i in prange(w.size):
        gi = g[i] * rescale + w[i] * wd
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        mi = m[i] * beta1 + one_minus_beta1 * gi
        ui = max(u[i] * beta2, abs(gi))
        m[i] = mi
        u[i] = ui
        if ui == 0:
            ui = tiny
        w[i] = w[i] - lr * mi / ui


_adamax_kernel = jit.kernel(_adamax_loop)


@register
class Adamax(Optimizer):
    """Adamax; see the module docstring for the update rule."""

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = check_number("beta1", beta1, low=0, high=1)
        check(self.beta1 < 1, f"beta1 must be < 1, got {beta1!r} (lr_t divides by 1 - beta1**t)")
        self.beta2 = check_number("beta2", beta2, low=0, high=1)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)  # m, u

    def _scalars(self, dtype, lr, wd, t, rescale_grad):
        lr = lr / (1.0 - self.beta1**t)
        return scalars(dtype, lr, wd, self.beta1, 1.0 - self.beta1, self.beta2, rescale_grad,
                       numpy.finfo(dtype).smallest_subnormal)

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        t = self._index_update_count[index]
        lr, wd, beta1, one_minus_beta1, beta2, rescale, tiny = self._scalars(
            weight.dtype, self._get_lr(index), self._get_wd(index), t, self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        g = grad * rescale + wd * weight
        clipping, clip = python_clip(self, weight.dtype)
        if clipping:
            g = mx_clip(xp, g, clip)
        m, u = state
        m *= beta1
        m += one_minus_beta1 * g
        u[...] = xp.maximum(beta2 * u, xp.abs(g))
        weight -= lr * m / xp.maximum(u, tiny)     # MXNet: m / u (0 / 0 = NaN where u = 0)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, beta1, one_minus_beta1, beta2, rescale, tiny = self._scalars(weight.dtype, lr, wd,
                                                                             count, rescale_grad)
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        m, u = state
        if jit.usable(_adamax_kernel, weight, grad, m, u):
            jit.launch(_adamax_kernel, weight.size, weight, grad, m, u, lr, wd, beta1,
                       one_minus_beta1, beta2, rescale, tiny, clip if clipping else lr, clipping)
            return
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, mm, uu) in chunks(weight, grad, m, u):
            g, t = a[:n], b[:n]
            xp.multiply(gr, rescale, out=g)
            xp.multiply(w, wd, out=t)
            g += t
            if clipping:
                mx_clip(xp, g, clip, out=g)
            mm *= beta1
            xp.multiply(g, one_minus_beta1, out=t)
            mm += t
            uu *= beta2
            xp.abs(g, out=t)
            xp.maximum(uu, t, out=uu)
            xp.maximum(uu, tiny, out=t)
            xp.multiply(mm, lr, out=g)
            g /= t
            w -= g
