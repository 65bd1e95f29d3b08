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
:func:`.adagrad.ndarray_clip`).

``m_schedule`` is kept once per optimizer, as MXNet does, and advances at every update of
any index, so its value depends on the order of the updates. :meth:`Nadam.fused_step`
therefore walks the group's parameters (``segments``) in order and advances the schedule
once per parameter, exactly as calling :meth:`Nadam.update` per index in that order would.
``m_schedule`` is part of :meth:`Nadam.state_dict`.
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


def _nadam_loop(w, g, m, v, lr, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, rescale,
                grad_div, m_div, v_div, one_minus_momentum, momentum_next, clip, clipping):
    for i in prange(w.size):
        gi = g[i] * rescale + w[i] * wd
        if clipping:
            if gi > clip:
                gi = clip
            elif gi < -clip:
                gi = -clip
        mi = m[i] * beta1 + one_minus_beta1 * gi
        vi = v[i] * beta2 + one_minus_beta2 * gi * gi
        m[i] = mi
        v[i] = vi
        m_bar = one_minus_momentum * (gi / grad_div) + momentum_next * (mi / m_div)
        w[i] = w[i] - lr * m_bar / (numpy.sqrt(vi / v_div) + eps)


_nadam_kernel = jit.kernel(_nadam_loop)


@register
class Nadam(Optimizer):
    """Nesterov Adam with MXNet's momentum schedule; see the module docstring."""

    order_sensitive = True

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = check_number("beta1", beta1, low=0, high=1)
        self.beta2 = check_number("beta2", beta2, low=0, high=1)
        check(self.beta2 < 1, f"beta2 must be < 1, got {beta2!r} (v / (1 - beta2**t) would be "
              "0 / 0)")
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

    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update_count(index)
        t = self._index_update_count[index]
        (lr, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, rescale, grad_div, m_div,
         v_div, one_minus_momentum, momentum_next) = self._advance_schedule(
            weight.dtype, self._get_lr(index), self._get_wd(index), t, self.grad_rescale(rescale_grad))
        xp = array_module(weight)
        g = grad * rescale + wd * weight
        clipping, clip = python_clip(self, weight.dtype)
        if clipping:
            g = mx_clip(xp, g, clip)
        m, v = state
        m *= beta1
        m += one_minus_beta1 * g
        v *= beta2
        v += one_minus_beta2 * g * g
        grad_prime = g / grad_div
        m_prime = m / m_div
        v_prime = v / v_div
        m_bar = one_minus_momentum * grad_prime + momentum_next * m_prime
        weight -= lr * m_bar / (xp.sqrt(v_prime) + eps)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        mean, var = state
        use_jit = jit.usable(_nadam_kernel, weight, grad, mean, var)
        if not use_jit:
            a, b = self._workspace.get(weight, 2)
        with jit.batch():                       # segments' kernels run spread over the cores
            for s in segments:                      # one schedule step per parameter, in order
                (lr_, wd_, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, rescale, grad_div,
                 m_div, v_div, one_minus_momentum, momentum_next) = self._advance_schedule(
                    weight.dtype, lr, wd, count, rescale_grad)
                if use_jit:
                    jit.launch(_nadam_kernel, weight[s].size, weight[s], grad[s], mean[s], var[s], lr_,
                               wd_, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, rescale,
                               grad_div, m_div, v_div, one_minus_momentum, momentum_next,
                               clip if clipping else lr_, clipping)
                    continue
                for n, (w, gr, m, v) in chunks(weight[s], grad[s], mean[s], var[s]):
                    g, t = a[:n], b[:n]
                    xp.multiply(gr, rescale, out=g)
                    xp.multiply(w, wd_, out=t)
                    g += t
                    if clipping:
                        mx_clip(xp, g, clip, out=g)
                    m *= beta1
                    xp.multiply(g, one_minus_beta1, out=t)
                    m += t
                    v *= beta2
                    xp.multiply(g, one_minus_beta2, out=t)
                    t *= g
                    v += t
                    g /= grad_div
                    g *= one_minus_momentum
                    xp.divide(m, m_div, out=t)
                    t *= momentum_next
                    g += t                          # m_bar
                    g *= lr_
                    xp.divide(v, v_div, out=t)
                    xp.sqrt(t, out=t)
                    t += eps
                    g /= t
                    w -= g

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The base counters plus the optimizer-wide ``m_schedule``."""
        state = super().state_dict()
        state["m_schedule"] = self.m_schedule
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.m_schedule = state["m_schedule"]
