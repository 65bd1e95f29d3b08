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
count, in the compiled and the array path alike. Multi-precision keeps MXNet's
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
from .array_ops import momentum_into, scaled_step
from .optimizer import register, scalars
from .scalar_ops import momentum as momentum_one
from .scalar_ops import scaled_step as scaled_step_one
from .sgd import MomentumOptimizer
from .sumsq import block_sums, chunk_table, segment_sums, sum_of_squares
from .workspace import chunks

BLOCK = 1 << 19
"""Elements (whole tensors) a fused step finishes before the next: the update pass re-reads
them from cache after the norms' pass."""


def _layer_rate(wsum, gsum, layerwise, lr, wd, eta, eps, rescale, lr_plain, one):
    """multi_lars's rate (float32 arithmetic) as ``one``'s type; ``lr_plain`` where the
    parameter takes no layer-wise rate. Both paths' (the array path runs it as Python)."""
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
        step = scaled_step_one(g[j], lr, rescale, clip, clipping)
        if with_momentum:
            m[j] = momentum_one(m[j], w[j], step, momentum, lr * wd)
            w[j] = w[j] + m[j]
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
        c0, c_end = first[blocks[b]], first[blocks[b + 1]]
        block_sums(sums, w, g, lo, hi, c0, c_end)
        for s in range(blocks[b], blocks[b + 1]):
            wsum, gsum = segment_sums(sums, first, s)
            rate = _layer_rate_kernel(wsum, gsum, layerwise[s], lr32, wd32, eta32, eps32,
                                      rescale32, lr_plain, one)
            for c in range(first[s], first[s + 1]):
                rates[c] = rate
        for k in prange(c_end - c0):
            a, z = lo[c0 + k], hi[c0 + k]
            _update_kernel(w[a:z], g[a:z], m[a:z], rates[c0 + k], wd, momentum, rescale, clip,
                           clipping, with_momentum)


_lars_kernel = jit.kernel(_lars_loop)

_NO_LARS_SUFFIXES = ("gamma", "beta", "bias")


@register
class LARS(MomentumOptimizer):
    """LARS; see the module docstring for the update rule."""

    master_first = False  # MXNet's LARS keeps ``(state, master)``

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(momentum=momentum, **kwargs)
        self.lazy_update = bool(lazy_update)
        self.eta = check_number("eta", eta, low=0)
        self.eps = check_number("eps", eps, low=0)
        self.momentum_correction = bool(momentum_correction)
        self.last_lr = None
        self.cur_lr = None
        self._lr_round = None
        self._group = None

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        """MXNet LARS: named parameters not ending in ``_weight`` default to ``wd_mult`` 0."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values() if not n.endswith("_weight")}
        self.wd_mult.update(args_wd_mult)

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

    # -- the base updates, with the indices at hand -------------------------------------
    def update(self, index, weight, grad, state, rescale_grad=None):
        self._in_group([index], None, None, super().update, index, weight, grad, state,
                       rescale_grad)

    def update_multi_precision(self, index, weight, grad, state, rescale_grad=None):
        self._in_group([index], weight, grad, super().update_multi_precision, index, weight,
                       grad, state, rescale_grad)

    def fused_update(self, indices, weight, grad, state, segments=None, rescale_grad=None) -> None:
        self._in_group(indices, weight, grad, super().fused_update, indices, weight, grad, state,
                       segments, rescale_grad)

    def _in_group(self, indices, weight, grad, call, *args):
        """``call(*args)`` with :meth:`fused_step` knowing the indices updated (their names
        decide the layer-wise rate) and, for float16 weights with a master copy, the float16
        weight and gradient seen flat (MXNet takes the norms of those). Inside another such
        call, the outer call's stand."""
        if self._group is not None:
            return call(*args)
        half = weight is not None and self.multi_precision and weight.dtype == numpy.float16
        self._group = (list(indices), weight.reshape(-1) if half else None,
                       grad.reshape(-1) if half else None)
        try:
            return call(*args)
        finally:
            self._group = None

    # -- the step -----------------------------------------------------------------------
    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        indices, norm_weight, norm_grad = self._group or (None, None, None)
        layerwise = self._layerwise(indices, len(segments))
        momentum = self._current_momentum()
        dtype = weight.dtype
        f = numpy.float32
        multi_lars = (f(lr), f(wd), f(self.eta), f(self.eps), f(rescale_grad), dtype.type(lr))
        _, wd_, mom_, rescale = scalars(dtype, lr, wd, momentum, rescale_grad)
        clip = dtype.type(self.clip_gradient) if self.clipping else None
        moms = () if state is None else (state,)
        if norm_weight is None and jit.usable(_lars_kernel, weight, grad, *moms):
            jit.launch(_lars_kernel, weight.size, weight, grad, weight if state is None else state,
                       *chunk_table(segments, BLOCK), numpy.array(layerwise), *multi_lars, wd_,
                       mom_, rescale, clip if clip is not None else wd_, clip is not None,
                       state is not None)
            return
        if norm_weight is None:
            norm_weight, norm_grad = weight, grad
        for k, seg in enumerate(segments):
            sums = ((sum_of_squares(norm_weight[seg]), sum_of_squares(norm_grad[seg]))
                    if layerwise[k] else (0.0, 0.0))
            rate = _layer_rate(*sums, layerwise[k], *multi_lars, dtype.type(1))
            self._segment_step(weight[seg], grad[seg], None if state is None else state[seg],
                               *scalars(dtype, rate, wd, momentum, rescale_grad), clip)

    def _layerwise(self, indices, count):
        """Per segment, whether it takes the layer-wise rate: by its own index's name where
        ``indices`` has one per segment, else by the first index's (all of them without
        indices)."""
        if not indices:
            return [True] * count
        if len(indices) == count:
            return [self._uses_lars(index) for index in indices]
        return [self._uses_lars(indices[0])] * count

    def _segment_step(self, weight, grad, mom, lr, wd, momentum, rescale, clip):
        """The array path's preloaded_multi_sgd(_mom)_update of one segment at its rate."""
        xp = array_module(weight)
        tmp, step = self._workspace.get(weight, 2)
        for n, (w, g, *m) in chunks(weight, grad, *(() if mom is None else (mom,))):
            s = scaled_step(xp, step[:n], g, lr, rescale, clip)
            if m:
                w += momentum_into(xp, m[0], w, s, momentum, lr * wd if wd else None, tmp[:n])
            elif wd:
                xp.multiply(w, lr * wd, out=tmp[:n])
                xp.negative(tmp[:n], out=tmp[:n])
                tmp[:n] -= s
                w += tmp[:n]
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
