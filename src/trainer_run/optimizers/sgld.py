"""Stochastic gradient Langevin dynamics (MXNet ``SGLD``, a Python-side update)::

    g      = clip(rescale_grad * grad, clip_gradient)
    weight = weight - lr / 2 * (g + wd * weight)
    weight = weight + N(0, sqrt(lr))          # one draw per element

as the two in-place statements of MXNet 1.9.1 (the seed text writes them as one, which
rounds differently in the last bit). Clipping applies whenever ``clip_gradient is not
None`` (0 clips every gradient to 0), through MXNet's ``clip`` operator.

The noise comes from ``self.rng`` (a NumPy ``Generator`` given by ``set_rng``; the updater
gives its backend's, so it is seeded and checkpointed with the run): ``standard_normal`` in
float64, scaled by ``sqrt(lr)`` in float64 and cast to the weight's dtype. A step draws its
numbers in chunks from that one stream, element after element, so a fused group (its
parameters back to back) draws what per-index updates of its parameters in index order draw,
and the compiled loop and the NumPy path draw alike.
"""

from __future__ import annotations

import math

import numpy

from .. import jit
from ..backend import array_module
from ..jit import prange
from .array_ops import decayed_after_clip
from .optimizer import Optimizer, python_clip, register, scalars
from .scalar_ops import decayed_after_clip as decayed_after_clip_one
from .workspace import Workspace, chunks

NOISE_CHUNK = 1 << 16
"""Draws per compiled launch: the noise of one chunk stays in cache until it is added."""


def _sgld_loop(w, g, z, half_lr, wd, rescale, scale, clip, clipping):
    for i in prange(w.size):
        wi = w[i] + half_lr * decayed_after_clip_one(g[i], w[i], rescale, wd, clip, clipping)
        w[i] = wi + w.dtype.type(z[i] * scale)


_sgld_kernel = jit.kernel(_sgld_loop)


@register
class SGLD(Optimizer):
    """SGLD; see the module docstring for the update rule."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._workspace = Workspace()
        self._host: dict = {}

    def create_state(self, index, weight):
        return None

    def _generator(self):
        if self.rng is None:
            raise RuntimeError("SGLD draws its noise from optimizer.rng, which is not set; "
                               "call optimizer.set_rng with a numpy.random.Generator (an "
                               "updater with a backend gives the backend's)")
        return self.rng

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        rng = self._generator()
        scale = math.sqrt(lr)
        half_lr, wd, rescale = scalars(weight.dtype, -lr / 2, wd, rescale_grad)
        xp = array_module(weight)
        clipping, clip = python_clip(self, weight.dtype)
        if jit.usable(_sgld_kernel, weight, grad):
            with jit.unbatched():                         # the noise buffer is reused
                for lo in range(0, weight.size, NOISE_CHUNK):
                    w, gr = weight[lo:lo + NOISE_CHUNK], grad[lo:lo + NOISE_CHUNK]
                    z = self._host_buffers(w.size, weight.dtype)[0]
                    rng.standard_normal(out=z)
                    jit.launch(_sgld_kernel, w.size, w, gr, z, half_lr, wd, rescale, scale,
                               clip if clipping else wd, clipping)
            return
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr) in chunks(weight, grad):
            g = decayed_after_clip(xp, a[:n], b[:n], gr, w, rescale, wd, clip)
            g *= half_lr
            w += g
            z, noise = self._host_buffers(n, weight.dtype)
            rng.standard_normal(out=z)                    # continues the same float64 stream
            z *= scale
            noise[...] = z
            w += noise if xp is numpy else xp.asarray(noise)

    def _host_buffers(self, n: int, dtype):
        """Host scratch: ``n`` float64 draws and their cast to ``dtype``."""
        key = numpy.dtype(dtype).str
        buffers = self._host.get(key)
        if buffers is None or buffers[0].size < n:
            buffers = (numpy.empty(n, numpy.float64), numpy.empty(n, dtype))
            self._host[key] = buffers
        return buffers[0][:n], buffers[1][:n]
