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
:func:`.array_ops.mx_clip`). MXNet scales the caller's gradient in place
(``grad *= rescale_grad``); here the gradient is left untouched (same weights and states).
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import rescaled, square_average_into
from .optimizer import Optimizer, python_clip, register, scalars
from .scalar_ops import rescaled as rescaled_one
from .scalar_ops import square_average as square_average_one
from .workspace import Workspace, chunks


def _adadelta_loop(w, g, acc_g, acc_d, wd, rho, one_minus_rho, eps, rescale, clip, clipping):
    for i in prange(w.size):
        gi = rescaled_one(g[i], rescale, clip, clipping)
        ag = square_average_one(acc_g[i], gi, rho, one_minus_rho)
        acc_g[i] = ag
        delta = numpy.sqrt(acc_d[i] + eps) / numpy.sqrt(ag + eps) * gi
        acc_d[i] = square_average_one(acc_d[i], delta, rho, one_minus_rho)
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

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        wd, rho, one_minus_rho, eps, rescale = scalars(
            weight.dtype, wd, self.rho, 1.0 - self.rho, self.epsilon, rescale_grad)
        clip = python_clip(self, weight.dtype)[1]
        acc_g, acc_delta = state
        if jit.usable(_adadelta_kernel, weight, grad, acc_g, acc_delta):
            jit.launch(_adadelta_kernel, weight.size, weight, grad, acc_g, acc_delta, wd, rho,
                       one_minus_rho, eps, rescale, clip if clip is not None else rho,
                       clip is not None)
            return
        xp = array_module(weight)
        a, b, c = self._workspace.get(weight, 3)
        for n, (w, gr, ag, ad) in chunks(weight, grad, acc_g, acc_delta):
            g, t, u = rescaled(xp, a[:n], gr, rescale, clip), b[:n], c[:n]
            square_average_into(xp, ag, g, rho, one_minus_rho, t)
            xp.sqrt(xp.add(ad, eps, out=t), out=t)
            t /= xp.sqrt(xp.add(ag, eps, out=u), out=u)
            t *= g                      # delta
            square_average_into(xp, ad, t, rho, one_minus_rho, u)
            xp.multiply(w, wd, out=u)
            u += t
            w -= u
