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
from ..errors import check_number
from ..jit import prange
from .array_ops import rescaled
from .optimizer import Optimizer, register, scalars
from .scalar_ops import rescaled as rescaled_one
from .workspace import Workspace, chunks


def _ftrl_loop(w, g, z, n, lr, wd, lamda1, beta, rescale, clip, clipping):
    one = w.dtype.type(1)
    zero = w.dtype.type(0)
    for i in prange(w.size):
        gi = rescaled_one(g[i], rescale, clip, clipping)
        ni = n[i]
        zi = z[i] + (gi - (numpy.sqrt(ni + gi * gi) - numpy.sqrt(ni)) * w[i] / lr)
        ni = ni + gi * gi
        z[i] = zi
        n[i] = ni
        active = one if abs(zi) > lamda1 else zero
        w[i] = (numpy.sign(zi) * lamda1 - zi) / ((beta + numpy.sqrt(ni)) / lr + wd) * active


_ftrl_kernel = jit.kernel(_ftrl_loop)


def _ftrl_arrays(xp, workspace, weight, grad, z, n, lr, wd, lamda1, beta, rescale, clip):
    """:func:`_ftrl_loop` on arrays, chunk by chunk, with scratch from ``workspace``
    (``clip``: a bound or None)."""
    a, b, c = workspace.get(weight, 3)
    for size, (w, gr, zz, nn) in chunks(weight, grad, z, n):
        g, t, u = rescaled(xp, a[:size], gr, rescale, clip), b[:size], c[:size]
        xp.multiply(g, g, out=t)
        xp.sqrt(nn, out=u)          # sqrt(n) before the update
        nn += t                     # n + g * g, the same sum as inside the square root
        xp.sqrt(nn, out=t)
        xp.subtract(t, u, out=u)
        u *= w
        u /= lr
        zz += xp.subtract(g, u, out=u)
        t += beta                   # t holds sqrt(n) of the updated n
        t /= lr
        t += wd
        xp.sign(zz, out=g)
        g *= lamda1
        g -= zz
        g /= t
        xp.greater(xp.abs(zz, out=t), lamda1, out=t)
        xp.multiply(g, t, out=w)


@register
class Ftrl(Optimizer):
    """FTRL-Proximal; see the module docstring for the update rule."""

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.require_positive_rate("z and the weight divide by it")
        self.lamda1 = check_number("lamda1", lamda1, low=0)
        self.beta = check_number("beta", beta, low=0)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)  # z, n

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        step = scalars(weight.dtype, lr, wd, self.lamda1, self.beta, rescale_grad)
        clip = weight.dtype.type(self.clip_gradient) if self.clipping else None
        if jit.usable(_ftrl_kernel, weight, grad, *state):
            jit.launch(_ftrl_kernel, weight.size, weight, grad, *state, *step,
                       clip if clip is not None else step[0], clip is not None)
            return
        _ftrl_arrays(array_module(weight), self._workspace, weight, grad, *state, *step, clip)
