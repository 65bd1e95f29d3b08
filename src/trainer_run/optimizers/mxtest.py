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
from .optimizer import Optimizer, register, scalars
from .workspace import Workspace, chunks


@register
class Test(Optimizer):
    """The Test optimizer: ``weight += rescale_grad * grad``; the state copies the weight."""

    counts_updates = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._workspace = Workspace()

    def create_state(self, index, weight):
        return array_module(weight).zeros(weight.shape, dtype=numpy.float32)

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        (rescale,) = scalars(weight.dtype, rescale_grad)
        xp = array_module(weight)
        (t,) = self._workspace.get(weight, 1)
        for n, (w, g, s) in chunks(weight, grad, state):
            xp.multiply(g, rescale, out=t[:n])
            w += t[:n]
            s[...] = w
