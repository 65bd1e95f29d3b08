"""LAMB (MXNet 1.9 ``LAMB`` through ``lamb_update_phase1`` / ``lamb_update_phase2``).

Per update ``t`` of an index (its own update count), phase 1 is element-wise::

    g      = clip(rescale_grad * grad, clip_gradient)
    mean   = beta1 * mean + (1 - beta1) * g
    var    = beta2 * var + (1 - beta2) * g * g
    r      = mean_hat / (sqrt(var_hat) + epsilon) + wd * weight
             with mean_hat = mean / (1 - beta1**t), var_hat = var / (1 - beta2**t)
             (bias_correction=False: mean_hat = mean, var_hat = var)

and phase 2 scales the whole tensor by its trust ratio::

    r1 = ||weight||, then max(r1, lower_bound) and min(r1, upper_bound) where given
    r2 = ||r||
    lr_t = lr * r1 / r2, or lr when r1 == 0 or r2 == 0
    weight = weight - lr_t * r

Sources: ``mxnet.optimizer.LAMB`` of 1.9.1 (``python/mxnet/optimizer/optimizer.py``, the
per-index branch of ``_update_impl``) and the kernels ``LambUpdatePhaseOneKernel`` /
``LambUpdatePhaseTwoKernel`` of ``src/operator/optimizer_op-inl.h``. As there, the bounds
apply only when truthy and >= 0 (Python passes them only when truthy, the kernel ignores
negative ones), ``beta**t`` is ``pow`` of the float32 ``beta`` in double, ``mean_hat`` is
divided in double (the kernel's ``1. - beta1_t``) and ``var_hat`` in the weight's type.
With ``multi_precision`` the master copy is updated (MXNet's multi-tensor path does so; the
single-tensor ``mp_lamb_update_phase2`` kernel documents it but writes only the float16
copy) and ``||weight||`` is that of the master copy, as ``weight32.norm()`` in 1.9.

``fused_step`` does phase 1 into a weight-sized buffer kept between steps, then per segment
(one per parameter) the two norms and phase 2, so every parameter gets its own trust ratio.
Compiled, it works block by block (about ``BLOCK`` elements of whole parameters): phase 1
of a chunk computes the chunk's sums of squares of the weight and of the update while the
chunk is in cache, and phase 2 re-reads the block from cache, so memory sees one pass. The
norms are :mod:`.sumsq`'s: the same whatever the thread count, in both paths.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..errors import check_number
from ..jit import prange
from .array_ops import average_into, rescaled, square_average_into
from .optimizer import Optimizer, below_one, register, scalars
from .scalar_ops import average as average_one
from .scalar_ops import rescaled as rescaled_one
from .scalar_ops import square_average as square_average_one
from .sumsq import chunk_sums, chunk_table, segment_sums, sum_of_squares
from .workspace import Workspace, chunks

BLOCK = 1 << 19
"""Elements (whole tensors) a fused step finishes before the next: phase 2 re-reads them from
cache."""


def _trust_rate_loop(lr, r1, r2, lower, upper):
    """lamb_update_phase2's rate from the two norms (bounds apply when >= 0)."""
    if lower >= 0 and r1 < lower:
        r1 = lower
    if upper >= 0 and r1 > upper:
        r1 = upper
    if r1 == 0 or r2 == 0:
        return lr
    return lr * r1 / r2


_trust_rate = jit.kernel(_trust_rate_loop, parallel=False)


def _phase1(w, g, m, v, r, wd, beta1, beta2, eps, rescale, clip, clipping, c1, c2, corrected):
    """Phase 1 on (views of) a chunk into the scratch ``r``."""
    one = w.dtype.type(1)
    for j in range(w.size):
        gi = rescaled_one(g[j], rescale, clip, clipping)
        mi = average_one(m[j], gi, beta1, one - beta1)
        vi = square_average_one(v[j], gi, beta2, one - beta2)
        m[j], v[j] = mi, vi
        if corrected:
            mean_hat = w.dtype.type(numpy.float64(mi) / c1)
            r[j] = mean_hat / (numpy.sqrt(vi / c2) + eps) + wd * w[j]
        else:
            r[j] = mi / (numpy.sqrt(vi) + eps) + wd * w[j]


def _phase2(w, r, rate):
    for j in range(w.size):
        w[j] = w[j] - rate * r[j]


_phase2_kernel = jit.kernel(_phase2, parallel=False)
_phase1_kernel = jit.kernel(_phase1, parallel=False)


def _lamb_loop(w, g, m, v, r, lo, hi, first, blocks, lr, wd, beta1, beta2, eps, rescale, clip,
               clipping, c1, c2, corrected, lower, upper):
    """LAMB over the segments of flat buffers (chunks and blocks of
    :func:`.sumsq.chunk_table`), block by block: phase 1 of each chunk with the chunk's sums
    of squares of the weight and of ``r`` while it is in cache, the trust ratio of each
    segment from its chunks' sums in order, then phase 2."""
    sums = numpy.zeros((lo.size, 2), numpy.float64)
    rates = numpy.empty(lo.size, w.dtype)
    for b in range(blocks.size - 1):
        c0, c_end = first[blocks[b]], first[blocks[b + 1]]
        for k in prange(c_end - c0):
            a, z = lo[c0 + k], hi[c0 + k]
            _phase1_kernel(w[a:z], g[a:z], m[a:z], v[a:z], r[a:z], wd, beta1, beta2, eps,
                           rescale, clip, clipping, c1, c2, corrected)
            chunk_sums(sums, c0 + k, w[a:z], r[a:z])
        for s in range(blocks[b], blocks[b + 1]):
            wsum, rsum = segment_sums(sums, first, s)
            rate = _trust_rate(lr, w.dtype.type(numpy.sqrt(wsum)), w.dtype.type(numpy.sqrt(rsum)),
                               lower, upper)
            for c in range(first[s], first[s + 1]):
                rates[c] = rate
        for k in prange(c_end - c0):
            a, z = lo[c0 + k], hi[c0 + k]
            _phase2_kernel(w[a:z], r[a:z], rates[c0 + k])


_lamb_kernel = jit.kernel(_lamb_loop)


@register
class LAMB(Optimizer):
    """LAMB; see the module docstring for the update rule."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = below_one("beta1", beta1, "mean_hat divides by 1 - beta1**t; without "
                               "bias_correction the mean would stay 0")
        self.beta2 = below_one("beta2", beta2, "var_hat divides by 1 - beta2**t; without "
                               "bias_correction var would stay 0")
        self.epsilon = check_number("epsilon", epsilon, low=0)
        self.lower_bound = None if lower_bound is None else check_number("lower_bound",
                                                                          lower_bound)
        self.upper_bound = None if upper_bound is None else check_number("upper_bound",
                                                                          upper_bound)
        self.bias_correction = bool(bias_correction)
        self._workspace = Workspace()
        self._phase1_out: dict = {}

    def create_state(self, index, weight):
        xp = array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)

    def _corrections(self, t, dtype):
        """(1 - beta1**t) as a double and (1 - beta2**t) in ``dtype``, as the kernel has them."""
        kind = numpy.dtype(dtype).type
        beta1_t = kind(float(numpy.float32(self.beta1)) ** t)
        beta2_t = kind(float(numpy.float32(self.beta2)) ** t)
        return 1.0 - float(beta1_t), kind(1) - beta2_t

    def _trust_lr(self, lr, r1, r2, dtype):
        """lamb_update_phase2's learning rate from the two norms, in ``dtype`` (the array
        path's; the compiled loop's is :func:`_trust_rate_loop`)."""
        kind = numpy.dtype(dtype).type
        lr = kind(lr)
        if self.lower_bound and self.lower_bound >= 0:
            bound = kind(self.lower_bound)
            r1 = r1 if r1 > bound else bound
        if self.upper_bound and self.upper_bound >= 0:
            bound = kind(self.upper_bound)
            r1 = r1 if r1 < bound else bound
        if r1 == 0 or r2 == 0:
            return lr
        return lr * r1 / r2

    def fused_step(self, weight, grad, state, lr, wd, count, segments, rescale_grad):
        dtype = weight.dtype
        one = dtype.type(1)
        phase1 = scalars(dtype, wd, self.beta1, self.beta2, self.epsilon, rescale_grad)
        clip = dtype.type(self.clip_gradient) if self.clipping else None
        c1, c2 = self._corrections(count, dtype) if self.bias_correction else (1.0, one)
        mean, var = state
        r = self._phase1_buffer(weight)
        if jit.usable(_lamb_kernel, weight, grad, mean, var):
            bound = [dtype.type(b) if b and b >= 0 else dtype.type(-1)
                     for b in (self.lower_bound, self.upper_bound)]
            jit.launch(_lamb_kernel, weight.size, weight, grad, mean, var, r,
                       *chunk_table(segments, BLOCK), dtype.type(lr), *phase1,
                       clip if clip is not None else one, clip is not None, c1, c2,
                       self.bias_correction, *bound)
            return
        self._phase1_chunks(weight, grad, mean, var, r, *phase1, clip, c1, c2)
        for seg in segments:
            w_seg, r_seg = weight[seg], r[seg]
            lr_t = self._trust_lr(lr, _norm(w_seg), _norm(r_seg), dtype)
            for _, (w, rr) in chunks(w_seg, r_seg):
                rr *= lr_t
                w -= rr

    def _phase1_chunks(self, weight, grad, mean, var, r, wd, beta1, beta2, eps, rescale, clip,
                       c1, c2):
        """Phase 1 of the array path into ``r``, chunk by chunk."""
        xp = array_module(weight)
        one = weight.dtype.type(1)
        a, b = self._workspace.get(weight, 2)
        for n, (w, gr, m, v, rr) in chunks(weight, grad, mean, var, r):
            g, tmp = rescaled(xp, a[:n], gr, rescale, clip), b[:n]
            average_into(xp, m, g, beta1, one - beta1, tmp)
            square_average_into(xp, v, g, beta2, one - beta2, tmp)
            if self.bias_correction:
                xp.divide(m, c1, out=rr, dtype=numpy.float64, casting="unsafe")
                xp.divide(v, c2, out=tmp)
                xp.sqrt(tmp, out=tmp)
            else:
                rr[...] = m
                xp.sqrt(v, out=tmp)
            tmp += eps
            rr /= tmp
            if wd:
                xp.multiply(w, wd, out=tmp)
                rr += tmp

    def _phase1_buffer(self, like):
        """A flat buffer of ``like``'s size and dtype for phase 1's output, kept between steps."""
        xp = array_module(like)
        key = (xp.__name__, like.dtype.str)
        buf = self._phase1_out.get(key)
        if buf is None or buf.size < like.size:
            buf = xp.empty(like.size, dtype=like.dtype)
            self._phase1_out[key] = buf
        return buf[:like.size]


def _norm(x):
    """L2 norm of a flat array from :func:`.sumsq.sum_of_squares`, in the array's dtype."""
    return x.dtype.type(numpy.sqrt(sum_of_squares(x)))
