"""Deterministic sums of squares, for the per-tensor norms of LAMB and LARS.

A sum runs in float64 over fixed chunks of ``SUM_CHUNK`` elements (counted from the
tensor's start), each chunk with eight interleaved partial sums, the chunk sums then added
in order from 0.0. The result depends on the values only: not on the thread count, the
memory alignment, or whether a fused loop computes it chunk by chunk inside its own pass
(:data:`chunk_sumsq`; :data:`chunk_sums` and :data:`block_sums` take two arrays' at once) or
:func:`sum_of_squares` afterwards. Without numba (or for float16 and CuPy arrays) the sum is
a float64 ``dot``.
"""

from __future__ import annotations

import numpy

from .. import jit
from ..backend import array_module
from ..jit import prange

SUM_CHUNK = 1 << 14


def _chunk_sumsq_loop(x):
    """Eight interleaved float64 partial sums (independent chains, so the loop runs at
    several additions per cycle without any reordering of floating-point additions): lane
    ``k`` sums the squares of elements ``k, k + 8, ...``; the tail joins lane 0."""
    acc = numpy.zeros(8, numpy.float64)
    full = x.size - x.size % 8
    for i in range(0, full, 8):
        for k in range(8):
            xi = numpy.float64(x[i + k])
            acc[k] += xi * xi
    s0 = acc[0]
    for i in range(full, x.size):
        xi = numpy.float64(x[i])
        s0 += xi * xi
    return ((s0 + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


def _sumsq_loop(x):
    total = 0.0
    for lo in range(0, x.size, SUM_CHUNK):
        total += chunk_sumsq(x[lo:lo + SUM_CHUNK])
    return total


def _segment_sums_loop(sums, first, s):
    """Segment ``s``'s two sums of squares from its chunks' rows of ``sums`` (chunks as in
    :func:`chunk_table`), added in order from 0.0 (as :func:`sum_of_squares` adds its
    chunks)."""
    a = 0.0
    b = 0.0
    for c in range(first[s], first[s + 1]):
        a += sums[c, 0]
        b += sums[c, 1]
    return a, b


chunk_sumsq = jit.kernel(_chunk_sumsq_loop, parallel=False)
segment_sums = jit.kernel(_segment_sums_loop, parallel=False)
_sumsq_kernel = jit.kernel(_sumsq_loop, parallel=False)


def sum_of_squares(x) -> float:
    """The sum of squares of a flat array, as a float64 (see the module docstring)."""
    if jit.usable(_sumsq_kernel, x):
        return float(_sumsq_kernel(x))
    wide = x.astype(numpy.float64)
    return float(array_module(x).dot(wide, wide))


def chunk_table(segments, block: int):
    """The chunks of ``segments`` (slices of a flat buffer) for a fused loop: ``(lo, hi,
    first, blocks)`` where chunk ``c`` is ``[lo[c], hi[c])``, segment ``s`` owns chunks
    ``first[s]`` to ``first[s + 1]``, and the segments ``blocks[b]`` to ``blocks[b + 1]``
    make up block ``b``, about ``block`` elements (whole segments), which a loop finishes
    before the next so that a block's second pass reads from cache."""
    starts = [numpy.arange(s.start, s.stop, SUM_CHUNK, dtype=numpy.int64) for s in segments]
    lo = numpy.concatenate(starts) if starts else numpy.zeros(0, numpy.int64)
    hi = numpy.concatenate([numpy.minimum(a + SUM_CHUNK, s.stop) for a, s in zip(starts, segments)])
    first = numpy.zeros(len(segments) + 1, numpy.int64)
    first[1:] = numpy.cumsum([a.size for a in starts])
    blocks, size = [0], 0
    for k, s in enumerate(segments):
        size += s.stop - s.start
        if size >= block:
            blocks.append(k + 1)
            size = 0
    if blocks[-1] != len(segments):
        blocks.append(len(segments))
    return lo, hi, first, numpy.array(blocks, numpy.int64)


def _chunk_sums_loop(sums, c, x, y):
    """Row ``c`` of ``sums``: the sums of squares of the chunks ``x`` and ``y`` (a fused loop's
    two norms, chunk by chunk, as in :func:`chunk_table`)."""
    sums[c, 0] = chunk_sumsq(x)
    sums[c, 1] = chunk_sumsq(y)


def _block_sums_loop(sums, x, y, lo, hi, c0, c1):
    """Rows ``c0`` to ``c1`` of ``sums``: :data:`chunk_sums` of those chunks of ``x`` and
    ``y``, in parallel."""
    for k in prange(c1 - c0):
        c = c0 + k
        chunk_sums(sums, c, x[lo[c]:hi[c]], y[lo[c]:hi[c]])


chunk_sums = jit.kernel(_chunk_sums_loop, parallel=False)
block_sums = jit.kernel(_block_sums_loop)
