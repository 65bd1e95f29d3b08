"""Embeddings: ``embed_id(ids, W)`` looks up rows of ``W`` (Chainer's ``F.embed_id``)."""

from __future__ import annotations

from ..autograd import Function, Variable, as_data
from ..backend import array_module


class EmbedID(Function):
    """``W[ids]``: ``W`` has shape ``(n_vocab, dim)``, ``ids`` integers of any shape.

    The gradient of ``W`` scatters ``gy`` back into the rows named by ``ids`` with ``xp.add.at``
    (unbuffered, so repeated ids sum), one code path for NumPy and CuPy (``cupy.add.at`` is CuPy's
    ``ufunc.at``, present in the CuPy 13 the ``cuda`` extra requires). When ``W`` is a
    parameter, the rows are added straight into its gradient buffer, with no dense temporary.
    """

    def forward(self, ids, W):
        self._ids = ids
        self._W_shape = W.shape
        return W[ids]

    def backward(self, gy):
        if not self.needs[1]:
            return None, None
        xp = array_module(gy)
        rows, g = self._ids.ravel(), gy.reshape(-1, self._W_shape[1])
        W = self.inputs[1]
        if W.creator is None:
            W.zero_if_stale()
            xp.add.at(W.grad, rows, g.astype(W.grad.dtype, copy=False))
            return None, None
        gW = xp.zeros(self._W_shape, dtype=gy.dtype)
        xp.add.at(gW, rows, g)
        return None, gW


def embed_id(ids, W) -> Variable:
    """Rows of ``W`` (n_vocab, dim) for integer ``ids`` of any shape: output ``ids.shape + (dim,)``.

    Not differentiable in ``ids``. Unlike Chainer there is no ``ignore_label``: every id must lie
    in ``[0, n_vocab)``.
    """
    return EmbedID()(as_data(ids), W)
