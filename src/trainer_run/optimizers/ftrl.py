"""FTRL-Proximal (MXNet ``ftrl_update``), state ``(z, n)``.

Per update::

    g      = clip(rescale_grad * grad, clip_gradient)
    z      = z + g - (sqrt(n + g * g) - sqrt(n)) * weight / lr
    n      = n + g * g
    weight = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) * (abs(z) > lamda1)

Weight decay enters only the denominator; the new weight depends on ``z`` and ``n`` alone.
Sources: ``Ftrl.update`` in ``mxnet/optimizer/optimizer.py`` (1.x: ``clip_gradient`` passed
only when truthy) and ``FtrlUpdateKernel`` in ``src/operator/optimizer_op-inl.h`` (clips
when the bound is >= 0; scalars in the weight's dtype).

One deviation: MXNet's constructor calls ``Optimizer.__init__`` without ``learning_rate``
and sets ``self.lr`` afterwards, so an ``lr_scheduler`` gets ``base_lr = 0.01`` whatever
``learning_rate`` is. Here the scheduler gets ``learning_rate`` like every other optimizer.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check, check_number
from ..jit import prange
from .optimizer import Optimizer, register, scalars
from .workspace import Workspace, chunks


def _ftrl_loop(w, g, z, n, lr, wd, lamda1, beta, rescale, clip, clipping):
    one = w.dtype.type(1)
    zero = w.dtype.type(0)
    for i in prange(w.size):
        gi = g[i] * rescale
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        ni = n[i]
        zi = z[i] + (gi - (numpy.sqrt(ni + gi * gi) - numpy.sqrt(ni)) * w[i] / lr)
        ni = ni + gi * gi
        z[i] = zi
        n[i] = ni
        active = one if abs(zi) > lamda1 else zero
        w[i] = (numpy.sign(zi) * lamda1 - zi) / ((beta + numpy.sqrt(ni)) / lr + wd) * active


_ftrl_kernel = jit.kernel(_ftrl_loop)


@register
class Ftrl(Optimizer):
    """FTRL-Proximal; see the module docstring for the update rule."""

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check(self.lr > 0, f"learning_rate must be > 0, got {self.lr!r} (z and the weight divide "
              "by it)")
        self.lamda1 = check_number("lamda1", lamda1, low=0)
        self.beta = check_number("beta", beta, low=0)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)  # z, n

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        lr, wd, lamda1, beta, rescale = scalars(weight.dtype, self._get_lr(index),
                                                self._get_wd(index), self.lamda1, self.beta,
                                                self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        z, n = state
        g = grad * rescale
        if self.clipping:
            clip = weight.dtype.type(self.clip_gradient)
            g = xp.clip(g, -clip, clip)
        z += g - (xp.sqrt(n + g * g) - xp.sqrt(n)) * weight / lr
        n += g * g
        weight[...] = ((xp.sign(z) * lamda1 - z) / ((beta + xp.sqrt(n)) / lr + wd)
                       * (xp.abs(z) > lamda1))

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, lamda1, beta, rescale = scalars(weight.dtype, lr, wd, self.lamda1, self.beta,
                                                rescale_grad)
        xp = array_module(weight)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        z, n = state
        if jit.usable(_ftrl_kernel, weight, grad, z, n):
            jit.launch(_ftrl_kernel, weight.size, weight, grad, z, n, lr, wd, lamda1, beta, rescale,
                         clip if clip is not None else lr, clip is not None)
            return
        a, b, c = self._workspace.get(weight, 3)
        for size, (w, gr, zz, nn) in chunks(weight, grad, z, n):
            g, t, u = a[:size], b[:size], c[:size]
            xp.multiply(gr, rescale, out=g)
            if clip is not None:
                xp.clip(g, -clip, clip, out=g)
            xp.multiply(g, g, out=t)
            xp.sqrt(nn, out=u)          # sqrt(n) before the update
            nn += t                     # n + g * g, the same sum as inside the square root
            xp.sqrt(nn, out=t)
            xp.subtract(t, u, out=u)
            u *= w
            u /= lr
            xp.subtract(g, u, out=u)
            zz += u
            t += beta                   # t holds sqrt(n) of the updated n
            t /= lr
            t += wd
            xp.sign(zz, out=g)
            g *= lamda1
            g -= zz
            g /= t
            xp.abs(zz, out=t)
            xp.greater(t, lamda1, out=t)
            xp.multiply(g, t, out=w)
