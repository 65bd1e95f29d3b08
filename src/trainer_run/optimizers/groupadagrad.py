"""GroupAdaGrad (MXNet 1.9 ``mxnet.optimizer.contrib.GroupAdaGrad``): AdaGrad with one
accumulated history per row of a 2-D weight.

Per update of an index::

    g = clip(rescale_grad * grad, clip_gradient)
    history += mean(g * g, axis=1, keepdims=True)        # shape (rows, 1)
    weight  -= lr * g / sqrt(history + eps)

Source: ``python/mxnet/optimizer/contrib.py`` of the 1.x line (1.9.1). For dense gradients
MXNet runs this formula in Python (NDArray operations), not the ``group_adagrad_update``
kernel (that one serves row-sparse gradients only), so, as there, clipping happens whenever
``clip_gradient is not None`` (0 clips every gradient to 0) with ``mx.nd.clip``'s rule,
and the history is float32 (``zeros`` without a dtype) of shape ``(rows, 1)``.

MXNet accepts only 2-D weights. Here a 1-D weight (a bias) is taken as a column: one row
per element, so its history is per element (plain AdaGrad without wd); this lets the
optimizer train any model with biases, and 2-D weights behave exactly as in MXNet. Weights
of other ranks are refused. Weight decay is not supported: MXNet asserts ``wd == 0`` at
the first update; here ``wd != 0`` is refused when the optimizer is built and again at an
update. The history is not shaped like the weight,
so the optimizer updates per index (``flat_state = False``, no ``fused_step``).
"""

from __future__ import annotations

import numpy

from ..backend import array_module
from ..errors import ConfigError, check_number
from .array_ops import mx_clip
from .optimizer import Optimizer, register, scalars


@register
class GroupAdaGrad(Optimizer):
    """GroupAdaGrad; see the module docstring for the update rule."""

    flat_state = False

    def __init__(self, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = check_number("eps", eps, low=0)
        self._check_wd(self.wd)

    @staticmethod
    def _check_wd(wd) -> None:
        if wd != 0:
            raise ConfigError(f"wd must be 0: weight decay is not supported for GroupAdaGrad, "
                              f"got {wd!r}")

    def create_state(self, index, weight):
        if weight.ndim not in (1, 2):
            raise ConfigError(
                f"GroupAdaGrad needs 1-D or 2-D weights (one history per row); parameter "
                f"{index!r} has shape {tuple(weight.shape)}; choose another optimizer")
        return array_module(weight).zeros((weight.shape[0], 1), dtype=numpy.float32)

    def update(self, index, weight, grad, state, rescale_grad=None):
        if weight.ndim == 1:
            weight, grad = weight.reshape(-1, 1), grad.reshape(-1, 1)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._check_wd(wd)
        xp = array_module(weight)
        lr, rescale = scalars(weight.dtype, lr, self.grad_rescale(rescale_grad))
        g = grad * rescale
        if self.clip_gradient is not None:
            clip = g.dtype.type(self.clip_gradient)
            g = mx_clip(xp, g, clip)
        state += xp.mean(xp.square(g), axis=1, keepdims=True)
        weight -= lr * g / xp.sqrt(state + self.float_stable_eps)

