"""LARS (MXNet 1.9 ``LARS``): SGD with momentum and a per-layer learning rate.

Per update of an index, with ``lr = learning_rate * lr_mult`` and ``wd = wd * wd_mult``::

    w_norm = ||weight||,  g_norm = ||grad|| * rescale_grad     (the gradient before clipping)
    lr_layer = lr * eta * w_norm / (g_norm + wd * w_norm + eps)  if w_norm > 0 and g_norm > 0
             = lr                                               otherwise, and for parameters
                                                                whose name ends in 'gamma',
                                                                'beta' or 'bias'
    step = lr_layer * clip(rescale_grad * grad, clip_gradient)
    mom  = momentum * mom - lr_layer * wd * weight - step        (momentum > 0)
    weight = weight + mom                                        (no momentum: mom from 0)

Sources: ``mxnet.optimizer.LARS`` of 1.9.1 (``python/mxnet/optimizer/optimizer.py``) takes,
for dense arrays, always its aggregated branch (even for one index): ``multi_sum_sq`` of the
weights and gradients, ``multi_lars`` (``src/operator/contrib/multi_lars-inl.h``: float32
arithmetic, ``lrs * eta * w_norm / (sqrt(g_sum_sq) * rescale_grad + wds * w_norm + eps)``)
and ``preloaded_multi_sgd_update`` / ``preloaded_multi_sgd_mom_update``
(``src/operator/contrib/preloaded_multi_sgd-inl.h``), whose formulas are written above.

Names: a parameter's name is ``param_idx2name[index]`` when given, else ``str(index)``, so
without ``param_idx2name`` (as under Gluon's Trainer) every parameter gets the layer-wise
rate. LARS's own ``set_wd_mult`` gives ``wd_mult`` 0 to every named parameter whose name
does not end in ``_weight`` (``_gamma`` is *not* kept, unlike the base class).

``momentum_correction`` multiplies the momentum by ``lr_now / lr_before`` (base rates, no
multipliers). MXNet records ``lr_before`` at every update call, so after a rate change only
the first call of a step sees the ratio; here it is recorded once per update round (a change
of ``num_update``), so every parameter of a step sees it, as in MXNet when one call updates
all parameters. It is part of :meth:`state_dict`.

The sums of squares are :mod:`.sumsq`'s (float64 in fixed chunks, rounded to float32 for
``multi_lars``; MXNet's multi_sum_sq accumulates in float32): the same whatever the thread
count, in the per-index and the fused path alike. Multi-precision keeps MXNet's
``(momentum, master)`` state; the norms are taken, as in MXNet, of the float16 weight and
gradient. ``fused_step`` computes each segment's norms and then updates it with its own
rate; compiled, block by block (about ``BLOCK`` elements of whole parameters), so that the
update pass reads the block from cache.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .optimizer import Optimizer, register, scalars
from .sumsq import chunk_sumsq, chunk_table, segment_sums, sum_of_squares
from .workspace import Workspace, chunks

BLOCK = 1 << 19
"""Elements (whole tensors) a fused step finishes before the next: the update pass re-reads
them from cache after the norms' pass."""


def _layer_rate(wsum, gsum, layerwise, lr, wd, eta, eps, rescale, lr_plain, one):
    """multi_lars's rate (float32 arithmetic) as ``one``'s type; ``lr_plain`` where the
    parameter takes no layer-wise rate."""
    if not layerwise:
        return lr_plain
    f = numpy.float32
    w_ss, g_ss = f(wsum), f(gsum)
    w_norm = numpy.sqrt(w_ss)
    if w_norm > 0 and g_ss > 0:
        return one * (lr * eta * w_norm / (numpy.sqrt(g_ss) * rescale + wd * w_norm + eps))
    return one * lr


_layer_rate_kernel = jit.kernel(_layer_rate, parallel=False)


def _update(w, g, m, lr, wd, momentum, rescale, clip, clipping, with_momentum):
    """preloaded_multi_sgd(_mom)_update on (views of) a chunk with the layer's rate ``lr``."""
    for j in range(w.size):
        if clipping:
            step = lr * min(max(rescale * g[j], -clip), clip)
        else:
            step = (lr * rescale) * g[j]
        if with_momentum:
            mj = momentum * m[j] - (lr * wd) * w[j] - step
            m[j] = mj
            w[j] = w[j] + mj
        else:
            w[j] = w[j] + (-((lr * wd) * w[j]) - step)


_update_kernel = jit.kernel(_update, parallel=False)


def _lars_loop(w, g, m, lo, hi, first, blocks, layerwise, lr32, wd32, eta32, eps32, rescale32,
               lr_plain, wd, momentum, rescale, clip, clipping, with_momentum):
    """LARS over the segments of flat buffers (chunks and blocks of
    :func:`.sumsq.chunk_table`), block by block: the sums of squares of each chunk's weight
    and gradient, each segment's rate from its chunks' sums in order, then the update,
    which reads the block again from cache."""
    one = w.dtype.type(1)
    sums = numpy.zeros((lo.size, 2), numpy.float64)
    rates = numpy.empty(lo.size, w.dtype)
    for b in range(blocks.size - 1):
        c0, c1 = first[blocks[b]], first[blocks[b + 1]]
        for k in prange(c1 - c0):
            c = c0 + k
            sums[c, 0] = chunk_sumsq(w[lo[c]:hi[c]])
            sums[c, 1] = chunk_sumsq(g[lo[c]:hi[c]])
        for s in range(blocks[b], blocks[b + 1]):
            wsum, gsum = segment_sums(sums, first, s)
            rate = _layer_rate_kernel(wsum, gsum, layerwise[s], lr32, wd32, eta32, eps32,
                                      rescale32, lr_plain, one)
            for c in range(first[s], first[s + 1]):
                rates[c] = rate
        for k in prange(c1 - c0):
            c = c0 + k
            a, z = lo[c], hi[c]
            _update_kernel(w[a:z], g[a:z], m[a:z], rates[c], wd, momentum, rescale, clip,
                           clipping, with_momentum)


_lars_kernel = jit.kernel(_lars_loop)

_NO_LARS_SUFFIXES = ("gamma", "beta", "bias")


@register
class LARS(Optimizer):
    """LARS; see the module docstring for the update rule."""

    master_first = False  # MXNet's LARS keeps ``(state, master)``

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = check_number("momentum", momentum, low=0, high=1)
        self.lazy_update = bool(lazy_update)
        self.eta = check_number("eta", eta, low=0)
        self.eps = check_number("eps", eps, low=0)
        self.momentum_correction = bool(momentum_correction)
        self.last_lr = None
        self.cur_lr = None
        self._lr_round = None
        self._workspace = Workspace()
        self._fused_context = None

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        """MXNet LARS: named parameters not ending in ``_weight`` default to ``wd_mult`` 0."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values() if not n.endswith("_weight")}
        self.wd_mult.update(args_wd_mult)

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return None
        return array_module(weight).zeros_like(weight)



    # -- pieces shared by both paths ---------------------------------------------------
    def _uses_lars(self, index) -> bool:
        name = self.idx2name[index] if index in self.idx2name else str(index)
        return not name.endswith(_NO_LARS_SUFFIXES)

    def _current_momentum(self) -> float:
        """The momentum of this update round, with MXNet's momentum correction."""
        if self._lr_round != self.num_update:
            lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
            self.last_lr = lr if self.cur_lr is None else self.cur_lr
            self.cur_lr = lr
            self._lr_round = self.num_update
        if self.momentum_correction and self.last_lr != 0:
            return self.momentum * (self.cur_lr / self.last_lr)
        return self.momentum

    def _layer_lr(self, lr, wd, w_sum_sq, g_sum_sq, rescale_grad):
        """multi_lars: the layer's learning rate, in float32."""
        f = numpy.float32
        lr, wd, w_sum_sq, g_sum_sq = f(lr), f(wd), f(float(w_sum_sq)), f(float(g_sum_sq))
        w_norm = numpy.sqrt(w_sum_sq)
        if w_norm > 0 and g_sum_sq > 0:
            return lr * f(self.eta) * w_norm / (numpy.sqrt(g_sum_sq) * f(rescale_grad)
                                                + wd * w_norm + f(self.eps))
        return lr

    # -- reference ---------------------------------------------------------------------
    def update(self, index, weight, grad, state, rescale_grad=None):
        self._update(index, weight, grad, state, weight, grad, self.grad_rescale(rescale_grad))

    def update_multi_precision(self, index, weight, grad, state, rescale_grad=None):
        """Through the float32 master; the norms are of the float16 weight and gradient."""
        if self.multi_precision and weight.dtype == numpy.float16:
            mom, master = state
            self._update(index, master, grad.astype(numpy.float32), mom, weight, grad,
                         self.grad_rescale(rescale_grad))
            weight[...] = master
        else:
            self.update(index, weight, grad, state, rescale_grad)

    def _update(self, index, weight, grad, mom, norm_weight, norm_grad, rescale_grad):
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        momentum = self._current_momentum()
        if self._uses_lars(index):
            lr = self._layer_lr(lr, wd, sum_of_squares(norm_weight.reshape(-1)),
                                sum_of_squares(norm_grad.reshape(-1)), rescale_grad)
        lr, wd, momentum, rescale = scalars(weight.dtype, lr, wd, momentum, rescale_grad)
        if self.clipping:
            clip = weight.dtype.type(self.clip_gradient)
            step = lr * array_module(grad).clip(rescale * grad, -clip, clip)
        else:
            step = (lr * rescale) * grad
        if mom is None:
            weight[...] = weight + (-((lr * wd) * weight) - step)
        else:
            mom[...] = momentum * mom - (lr * wd) * weight - step
            weight[...] = weight + mom

    # -- fused -------------------------------------------------------------------------
    def fused_update(self, indices, weight, grad, state, segments=None, rescale_grad=None) -> None:
        """The base fused update, with the group's indices (for the names) and, for float16
        weights with a master copy, the float16 arrays (for the norms) at hand."""
        half = self.multi_precision and weight.dtype == numpy.float16
        self._fused_context = (list(indices), weight if half else None, grad if half else None)
        try:
            super().fused_update(indices, weight, grad, state, segments, rescale_grad)
        finally:
            self._fused_context = None

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        indices, norm_weight, norm_grad = self._fused_context or (None, None, None)
        if norm_weight is None:
            norm_weight, norm_grad = weight, grad
        momentum = self._current_momentum()
        xp = array_module(weight)
        dtype = weight.dtype
        clip = dtype.type(self.clip_gradient) if self.clipping else None
        layerwise = [index is None or self._uses_lars(index) for index in
                     (indices[k if len(indices) == len(segments) else 0] if indices else None
                      for k in range(len(segments)))]
        moms = () if state is None else (state,)
        if norm_weight is weight and jit.usable(_lars_kernel, weight, grad, *moms):
            f = numpy.float32
            _, wd_, mom_, rescale = scalars(dtype, lr, wd, momentum, rescale_grad)
            jit.launch(_lars_kernel, weight.size, weight, grad, weight if state is None else state,
                       *chunk_table(segments, BLOCK), numpy.array(layerwise), f(lr), f(wd),
                       f(self.eta), f(self.eps), f(rescale_grad), dtype.type(lr), wd_, mom_,
                       rescale, clip if clip is not None else wd_, clip is not None,
                       state is not None)
            return
        tmp, step = self._workspace.get(weight, 2)
        for k, seg in enumerate(segments):
            layer_lr = lr
            if layerwise[k]:
                layer_lr = self._layer_lr(lr, wd, sum_of_squares(norm_weight[seg]),
                                          sum_of_squares(norm_grad[seg]), rescale_grad)
            lr_, wd_, mom_, rescale = scalars(dtype, layer_lr, wd, momentum, rescale_grad)
            arrays = (weight[seg], grad[seg]) + (() if state is None else (state[seg],))
            for n, (w, g, *m) in chunks(*arrays):
                s, t = step[:n], tmp[:n]
                if clip is None:
                    xp.multiply(g, lr_ * rescale, out=s)
                else:
                    xp.multiply(g, rescale, out=s)
                    xp.clip(s, -clip, clip, out=s)
                    s *= lr_
                if m:
                    (m,) = m
                    m *= mom_
                    if wd_:
                        xp.multiply(w, lr_ * wd_, out=t)
                        m -= t
                    m -= s
                    w += m
                elif wd_:
                    xp.multiply(w, lr_ * wd_, out=t)
                    xp.negative(t, out=t)
                    t -= s
                    w += t
                else:
                    w -= s

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = super().state_dict()
        state["momentum_correction_lr"] = [self.last_lr, self.cur_lr, self._lr_round]
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.last_lr, self.cur_lr, self._lr_round = state.get("momentum_correction_lr",
                                                              [None, None, None])
