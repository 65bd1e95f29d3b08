"""Adamax (MXNet 1.9 ``Adamax``: NDArray arithmetic in Python), state ``(m, u)``.

Per update ``t`` of an index (its own update count)::

    lr_t   = lr / (1 - beta1**t)
    g      = clip(rescale_grad * grad + wd * weight, clip_gradient)
    m      = beta1 * m + (1 - beta1) * g
    u      = maximum(beta2 * u, abs(g))
    weight = weight - lr_t * m / u

Source: ``Adamax.update`` in ``mxnet/optimizer/optimizer.py`` (1.x). ``lr_t`` and
``1 - beta1`` are computed in double precision and cast to the weight's dtype. Clipping
follows the Python code (``clip_gradient is not None``; see :func:`.array_ops.mx_clip`).

One deviation: an entry whose gradient has been exactly zero at every update so far (a
dead ReLU unit, an unused row) has ``m = u = 0``, and MXNet's ``m / u`` turns its weight
into NaN, which then spreads through the model. Here the division is by ``u`` where
``u != 0`` and by 1 where ``u == 0`` (``u + (u == 0)``), so such an entry does not move
(``0 / 1 = 0``); every other entry gets MXNet's value exactly. No subnormal number is
involved, so the rule holds on a GPU too, which flushes subnormals to zero (dividing by
the smallest subnormal there was ``0 / 0 = NaN``).
"""

from __future__ import annotations

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import average_into, decayed_always
from .optimizer import Optimizer, below_one, python_clip, register, scalars
from .scalar_ops import average as average_one
from .scalar_ops import decayed as decayed_one
from .workspace import Workspace, chunks


def _adamax_loop(w, g, m, u, lr, wd, beta1, one_minus_beta1, beta2, rescale, one, clip,
                 clipping):
    for i in prange(w.size):
        gi = decayed_one(g[i], w[i], rescale, wd, clip, clipping)
        mi = average_one(m[i], gi, beta1, one_minus_beta1)
        ui = max(u[i] * beta2, abs(gi))
        m[i] = mi
        u[i] = ui
        w[i] = w[i] - lr * mi / (ui if ui != 0 else one)


_adamax_kernel = jit.kernel(_adamax_loop)


@register
class Adamax(Optimizer):
    """Adamax; see the module docstring for the update rule."""

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = below_one("beta1", beta1, "lr_t divides by 1 - beta1**t")
        self.beta2 = check_number("beta2", beta2, low=0, high=1)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)  # m, u

    def _scalars(self, dtype, lr, wd, t, rescale_grad):
        lr = lr / (1.0 - self.beta1**t)
        return scalars(dtype, lr, wd, self.beta1, 1.0 - self.beta1, self.beta2, rescale_grad, 1.0)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        lr, wd, beta1, one_minus_beta1, beta2, rescale, one = self._scalars(weight.dtype, lr, wd,
                                                                            count, rescale_grad)
        clip = python_clip(self, weight.dtype)[1]
        m, u = state
        if jit.usable(_adamax_kernel, weight, grad, m, u):
            jit.launch(_adamax_kernel, weight.size, weight, grad, m, u, lr, wd, beta1,
                       one_minus_beta1, beta2, rescale, one, clip if clip is not None else lr,
                       clip is not None)
            return
        xp = array_module(weight)
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, mm, uu) in chunks(weight, grad, m, u):
            g, t = decayed_always(xp, a[:n], b[:n], gr, w, rescale, wd, clip), b[:n]
            average_into(xp, mm, g, beta1, one_minus_beta1, t)
            uu *= beta2
            xp.maximum(uu, xp.abs(g, out=t), out=uu)
            xp.equal(uu, 0, out=t)          # MXNet: m / u (0 / 0 = NaN where u = 0)
            t += uu                         # u, or 1 where u = 0
            xp.multiply(mm, lr, out=g)
            g /= t
            w -= g
