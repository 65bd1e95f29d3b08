"""Nadam (MXNet 1.9 ``Nadam``: NDArray arithmetic in Python), state ``(m, v)``.

Per update ``t`` of an index (its own update count)::

    g            = clip(rescale_grad * grad + wd * weight, clip_gradient)
    momentum_t   = beta1 * (1 - 0.5 * 0.96**(t * schedule_decay))
    momentum_t_1 = beta1 * (1 - 0.5 * 0.96**((t + 1) * schedule_decay))
    m_schedule   = m_schedule * momentum_t          # ONE value for the whole optimizer
    m_schedule_next = m_schedule * momentum_t_1
    m      = beta1 * m + (1 - beta1) * g
    v      = beta2 * v + (1 - beta2) * g * g
    m_bar  = (1 - momentum_t) * g / (1 - m_schedule) + momentum_t_1 * m / (1 - m_schedule_next)
    weight = weight - lr * m_bar / (sqrt(v / (1 - beta2**t)) + epsilon)

Source: ``Nadam.update`` in ``mxnet/optimizer/optimizer.py`` (1.x). The scalar factors are
computed in double precision and cast to the weight's dtype, as NDArray scalar operators
do. Clipping follows the Python code (``clip_gradient is not None``; see
:func:`.array_ops.mx_clip`).

``m_schedule`` is kept once per optimizer, as MXNet does, and advances at every update of
any index, so its value depends on the order of the updates. :meth:`Nadam.fused_step`
therefore walks the group's parameters (``segments``) in order and advances the schedule
once per parameter, exactly as updating each index in that order (:meth:`.Optimizer.update`)
would.
``m_schedule`` is part of :meth:`Nadam.state_dict`.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import average_into, decayed_always, square_average_into
from .optimizer import Optimizer, below_one, python_clip, register, scalars
from .scalar_ops import average as average_one
from .scalar_ops import decayed as decayed_one
from .scalar_ops import square_average as square_average_one
from .workspace import Workspace, chunks


def _nadam_loop(w, g, m, v, lr, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, rescale,
                grad_div, m_div, v_div, one_minus_momentum, momentum_next, clip, clipping):
    for i in prange(w.size):
        gi = decayed_one(g[i], w[i], rescale, wd, clip, clipping)
        mi = average_one(m[i], gi, beta1, one_minus_beta1)
        vi = square_average_one(v[i], gi, beta2, one_minus_beta2)
        m[i] = mi
        v[i] = vi
        m_bar = one_minus_momentum * (gi / grad_div) + momentum_next * (mi / m_div)
        w[i] = w[i] - lr * m_bar / (numpy.sqrt(vi / v_div) + eps)


_nadam_kernel = jit.kernel(_nadam_loop)


def _nadam_arrays(xp, workspace, weight, grad, m, v, lr, wd, beta1, one_minus_beta1, beta2,
                  one_minus_beta2, eps, rescale, grad_div, m_div, v_div, one_minus_momentum,
                  momentum_next, clip):
    """:func:`_nadam_loop` on arrays, chunk by chunk, with scratch from ``workspace``
    (``clip``: a bound or None)."""
    a, b = workspace.get(weight, 2)
    for n, (w, gr, mm, vv) in chunks(weight, grad, m, v):
        g, t = decayed_always(xp, a[:n], b[:n], gr, w, rescale, wd, clip), b[:n]
        average_into(xp, mm, g, beta1, one_minus_beta1, t)
        square_average_into(xp, vv, g, beta2, one_minus_beta2, t)
        g /= grad_div
        g *= one_minus_momentum
        xp.divide(mm, m_div, out=t)
        t *= momentum_next
        g += t                          # m_bar
        g *= lr
        xp.sqrt(xp.divide(vv, v_div, out=t), out=t)
        t += eps
        g /= t
        w -= g


@register
class Nadam(Optimizer):
    """Nesterov Adam with MXNet's momentum schedule; see the module docstring."""

    order_sensitive = True

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = check_number("beta1", beta1, low=0, high=1)
        self.beta2 = below_one("beta2", beta2, "v / (1 - beta2**t) would be 0 / 0")
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self.schedule_decay = check_number("schedule_decay", schedule_decay, low=0)
        self.m_schedule = 1.0
        self._workspace = Workspace()

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)  # mean, variance

    def _advance_schedule(self, dtype, lr, wd, t, rescale_grad):
        """Advances ``m_schedule`` by one update at count ``t``; the update's scalars in ``dtype``."""
        momentum_t = self.beta1 * (1.0 - 0.5 * (0.96 ** (t * self.schedule_decay)))
        momentum_t_1 = self.beta1 * (1.0 - 0.5 * (0.96 ** ((t + 1) * self.schedule_decay)))
        self.m_schedule = self.m_schedule * momentum_t
        m_schedule_next = self.m_schedule * momentum_t_1
        return scalars(dtype, lr, wd, self.beta1, 1.0 - self.beta1, self.beta2, 1.0 - self.beta2,
                       self.epsilon, rescale_grad, 1.0 - self.m_schedule,
                       1.0 - m_schedule_next, 1.0 - self.beta2**t, 1.0 - momentum_t, momentum_t_1)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        clip = python_clip(self, weight.dtype)[1]
        compiled = jit.usable(_nadam_kernel, weight, grad, *state)
        with jit.batch():                       # segments' kernels run spread over the cores
            for s in segments:                  # one schedule step per parameter, in order
                step = self._advance_schedule(weight.dtype, lr, wd, count, rescale_grad)
                arrays = (weight[s], grad[s], *(x[s] for x in state))
                if compiled:
                    jit.launch(_nadam_kernel, arrays[0].size, *arrays, *step,
                               clip if clip is not None else step[0], clip is not None)
                else:
                    _nadam_arrays(array_module(weight), self._workspace, *arrays, *step, clip)

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The base counters plus the optimizer-wide ``m_schedule``."""
        state = super().state_dict()
        state["m_schedule"] = self.m_schedule
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.m_schedule = state["m_schedule"]
