"""MXNet's ``Test`` optimizer (registered as ``test``), used by MXNet's own test-suite::

    weight = weight + rescale_grad * grad
    state  = weight                       # a float32 copy

The learning rate, weight decay and clipping are not used. As in MXNet, the update is not
counted (``num_update`` stays at ``begin_num_update``), per index and fused alike, and the
state is created as float32 whatever the weight's dtype (MXNet's ``zeros`` default).
"""

from __future__ import annotations

import numpy

from ..backend import array_module
from .optimizer import Optimizer, _Flat, register, scalars
from .workspace import Workspace, chunks


@register
class Test(Optimizer):
    """The Test optimizer: ``weight += rescale_grad * grad``; the state copies the weight."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        return array_module(weight).zeros(weight.shape, dtype=numpy.float32)

    def update(self, index, weight, grad, state, rescale_grad=None):
        """:meth:`fused_step` on the arrays seen flat, without counting the update (MXNet's
        Test does not count)."""
        flat = _Flat()
        self._step(flat(weight), grad.reshape(-1), flat(state), None, rescale_grad)
        flat.write_back()

    def fused_update(self, indices, weight, grad, state, segments=None, rescale_grad=None) -> None:
        """One fused step of a flat group, without counting updates (MXNet's Test does not)."""
        if self.multi_precision and weight.dtype == numpy.float16:
            master, inner = self._split_master(state)
            self._step(master, grad.astype(numpy.float32), inner, segments, rescale_grad)
            weight[...] = master
        else:
            self._step(weight, grad, state, segments, rescale_grad)

    def _step(self, weight, grad, state, segments, rescale_grad):
        self.fused_step(weight, grad, state, 0.0, 0.0, 0, segments, self.grad_rescale(rescale_grad))

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        (rescale,) = scalars(weight.dtype, rescale_grad)
        xp = array_module(weight)
        (t,) = self._workspace.get(weight, 1)
        for n, (w, g, s) in chunks(weight, grad, state):
            xp.multiply(g, rescale, out=t[:n])
            w += t[:n]
            s[...] = w
