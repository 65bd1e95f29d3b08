"""Scratch buffers and cache-sized chunking for fused optimizer steps.

A fused step on NumPy walks a flat buffer in chunks small enough that the several
element-wise passes of one update stay in the CPU cache, so main memory sees roughly one
read and one write of each operand. Scratch arrays are kept between steps so a step
allocates nothing. On CuPy the whole buffer is one chunk.
"""

from __future__ import annotations

import numpy

from ..backend import array_module

CHUNK = 1 << 15


class Workspace:
    """Reusable scratch arrays, ``count`` at a time, keyed by dtype and module."""

    def __init__(self):
        self._buffers: dict = {}

    def get(self, like, count: int):
        """``count`` scratch arrays able to hold one chunk of ``like``'s dtype."""
        xp = array_module(like)
        size = CHUNK if xp is numpy else like.size
        key = (xp, like.dtype, count)
        buffers = self._buffers.get(key)
        if buffers is None or buffers[0].size < size:
            buffers = tuple(xp.empty(size, dtype=like.dtype) for _ in range(count))
            self._buffers[key] = buffers
        return buffers


def chunks(*arrays):
    """Yields aligned chunks (tuples of views) of flat arrays of equal length."""
    n = arrays[0].size
    step = CHUNK if array_module(arrays[0]) is numpy else max(n, 1)
    if n <= step:
        yield n, arrays
        return
    for start in range(0, n, step):
        stop = min(start + step, n)
        yield stop - start, tuple(a[start:stop] for a in arrays)
