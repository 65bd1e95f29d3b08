"""Attention: :func:`scaled_dot_product_attention`, ``softmax(q @ k^T * scale + mask) @ v`` over
``(batch, heads, T, head_size)`` arrays, with an optional causal mask.

The softmax subtracts each row's maximum before the exponential, so large scores do not overflow.
The forward keeps one ``(batch, heads, T_q, T_k)`` array for the backward, the attention
probabilities; the scores are computed in that same buffer and turned into the probabilities in
place. The backward's ``(batch, heads, T_q, T_k)`` temporaries are freed when it returns.
"""

from __future__ import annotations

import math

from ..autograd import Function, Variable
from ..backend import array_module


def _causal_bias(xp, t_q: int, t_k: int, dtype):
    """``(t_q, t_k)``: 0 where query ``i`` (at position ``t_k - t_q + i``) may see key ``j``
    (``j <= t_k - t_q + i``), -inf above that diagonal."""
    return xp.triu(xp.full((t_q, t_k), -math.inf, dtype=dtype), k=t_k - t_q + 1)


class ScaledDotProductAttention(Function):
    """``softmax(q @ k^T * scale + mask) @ v``; see :func:`scaled_dot_product_attention`."""

    def __init__(self, causal: bool = True, scale: float | None = None):
        self.causal, self.scale = causal, scale

    def forward(self, q, k, v):
        if not (q.ndim == k.ndim == v.ndim == 4 and q.shape[:2] == k.shape[:2] == v.shape[:2]
                and q.shape[3] == k.shape[3] and k.shape[2] == v.shape[2]):
            raise ValueError(f"scaled_dot_product_attention needs q (B, H, T_q, D), k (B, H, T_k, D) "
                             f"and v (B, H, T_k, D_v), got {q.shape}, {k.shape} and {v.shape}")
        t_q, t_k = q.shape[2], k.shape[2]
        if self.causal and t_q > t_k:
            raise ValueError(f"a causal attention needs T_q <= T_k, got T_q={t_q} and T_k={t_k}")
        xp = array_module(q)
        scale = 1 / math.sqrt(q.shape[3]) if self.scale is None else self.scale
        self._scale = q.dtype.type(scale)
        p = q @ k.swapaxes(-1, -2)
        p *= self._scale
        if self.causal:
            p += _causal_bias(xp, t_q, t_k, p.dtype)
        p -= p.max(axis=-1, keepdims=True)
        xp.exp(p, out=p)
        p /= p.sum(axis=-1, keepdims=True)
        self._q, self._k, self._v, self._p = q, k, v, p
        return p @ v

    def backward(self, gy):
        p, needs = self._p, self.needs
        gv = p.swapaxes(-1, -2) @ gy if needs[2] else None
        if not (needs[0] or needs[1]):
            return None, None, gv
        gs = gy @ self._v.swapaxes(-1, -2)
        gs -= (gs * p).sum(axis=-1, keepdims=True)
        gs *= p
        gs *= self._scale
        gq = gs @ self._k if needs[0] else None
        gk = gs.swapaxes(-1, -2) @ self._q if needs[1] else None
        return gq, gk, gv


def scaled_dot_product_attention(q, k, v, causal: bool = True, scale: float | None = None) -> Variable:
    """``softmax(q @ k^T * scale + mask) @ v`` over the last axis of the scores.

    ``q`` is ``(batch, heads, T_q, head_size)``, ``k`` ``(batch, heads, T_k, head_size)`` and ``v``
    ``(batch, heads, T_k, head_size_v)``; the output is ``(batch, heads, T_q, head_size_v)``.
    ``scale`` defaults to ``1 / sqrt(head_size)``. With ``causal`` (the default), the query at
    position ``t`` sees the keys at positions ``<= t`` only (the mask is -inf above the diagonal);
    when ``T_q < T_k`` the queries are the last ``T_q`` positions (a query of new tokens against
    cached keys). ``causal=False`` lets every query see every key. The softmax is computed after
    subtracting each row's maximum. The gradients of ``q``, ``k`` and ``v`` are those of this
    expression; the function keeps one ``(batch, heads, T_q, T_k)`` array (the probabilities).

    Raises:
        ValueError: for shapes other than the above, or ``causal`` with ``T_q > T_k``.
    """
    return ScaledDotProductAttention(causal, scale)(q, k, v)
