"""Normalisations (Chainer's ``chainer.functions.normalization``).

* :func:`batch_normalization`: training mode; statistics of the batch over every axis but axis 1
  (``x`` of shape ``(N, C)`` or ``(N, C, H, W)``), optionally updating running statistics in place.
* :func:`fixed_batch_normalization`: evaluation mode, with given statistics.
* :func:`layer_normalization`: statistics of each sample over the last axis.

All compute ``(x - mean) / sqrt(var + eps) * gamma + beta`` with the biased variance (divided by
the number of elements averaged over), in the dtype of ``x``, and back-propagate to ``x``,
``gamma`` and ``beta`` (and, in the fixed mode, to ``mean`` and ``var``).
"""

from __future__ import annotations

import numpy

from .. import jit
from ..autograd import Function, Variable
from ..backend import array_module
from . import loops


def _channel_axes(ndim):
    """The axes batch normalisation reduces over: every axis but 1."""
    return (0,) + tuple(range(2, ndim))


def _per_channel(a, ndim):
    """A ``(C,)`` array reshaped to broadcast against axis 1 of an ``ndim``-dimensional array."""
    return a.reshape((1, -1) + (1,) * (ndim - 2))


def _channel_rows(x):
    """``x`` as a ``(C, M)`` view, one row per channel (axis 1), where its memory holds each
    channel's elements together (the layout convolutions give, :mod:`.convolution`); else None."""
    t = x.transpose(1, *range(2, x.ndim), 0)
    return t.reshape(x.shape[1], -1) if t.flags.c_contiguous else None


def _check_params(x, gamma, beta, axis):
    """Raises ValueError unless ``x`` has 2+ dimensions and ``gamma``, ``beta`` the shape of ``axis``."""
    if x.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions, got shape {x.shape}")
    size = x.shape[axis]
    for name, a in (("gamma", gamma), ("beta", beta)):
        if a.shape != (size,):
            raise ValueError(f"{name} must have shape ({size},), the size of axis {axis} of x, got {a.shape}")


class BatchNormalization(Function):
    """Training-mode batch normalisation; see :func:`batch_normalization`."""

    def __init__(self, eps, running_mean, running_var, decay):
        self.eps, self.decay = eps, decay
        self.running_mean, self.running_var = running_mean, running_var

    def forward(self, x, gamma, beta):
        _check_params(x, gamma, beta, 1)
        self._gamma, rows = gamma, _channel_rows(x)
        if rows is not None and jit.usable(loops.batch_norm_forward, rows, gamma, beta):
            return self._forward_rows(x, rows, gamma, beta)
        xp = array_module(x)
        axes, nd = _channel_axes(x.ndim), x.ndim
        mean = x.mean(axis=axes)
        xhat = x - _per_channel(mean, nd)  # centred in place into x-hat below: one temporary in all
        var = xp.square(xhat).mean(axis=axes)
        self._inv_std = 1 / xp.sqrt(var + x.dtype.type(self.eps))
        xhat *= _per_channel(self._inv_std, nd)
        self._xhat = xhat
        self._update_running(mean, var, x.size // x.shape[1])
        y = xhat * _per_channel(gamma, nd)
        y += _per_channel(beta, nd)
        return y

    def _forward_rows(self, x, rows, gamma, beta):
        """The compiled forward on ``rows`` (:func:`_channel_rows`): the statistics in one pass
        (:func:`.loops.batch_norm_forward`); ``y`` and ``xhat`` keep ``x``'s layout."""
        c, dtype = rows.shape[0], x.dtype
        mean, var, inv_std = (numpy.empty(c, dtype) for _ in range(3))
        xhat, y = numpy.empty_like(rows), numpy.empty_like(rows)
        jit.launch(loops.batch_norm_forward, rows.size, rows, gamma, beta, dtype.type(self.eps),
                   mean, var, inv_std, xhat, y)
        self._inv_std, self._xhat = inv_std, self._like(x, xhat)
        self._update_running(mean, var, rows.shape[1])
        return self._like(x, y)

    @staticmethod
    def _like(x, rows):
        """``rows`` (C, M) seen with ``x``'s shape, in its layout."""
        shape = (x.shape[1], *x.shape[2:], x.shape[0])
        return rows.reshape(shape).transpose(x.ndim - 1, 0, *range(1, x.ndim - 1))

    def _update_running(self, mean, var, m):
        decay = self.decay
        if self.running_mean is not None:
            self.running_mean *= decay
            self.running_mean += (1 - decay) * mean
        if self.running_var is not None:
            adjust = m / max(m - 1, 1)  # the unbiased variance, as Chainer keeps
            self.running_var *= decay
            self.running_var += (1 - decay) * adjust * var

    def backward(self, gy):
        xhat, nd = self._xhat, gy.ndim
        rows, xhat_rows = _channel_rows(gy), _channel_rows(xhat)
        if rows is not None and xhat_rows is not None and jit.usable(loops.batch_norm_backward, rows,
                                                                      xhat_rows):
            return self._backward_rows(gy, rows, xhat_rows)
        axes = _channel_axes(nd)
        gbeta = gy.sum(axis=axes)
        ggamma = (gy * xhat).sum(axis=axes)
        gx = None
        if self.needs[0]:
            m = gy.size // gy.shape[1]
            coeff = _per_channel(self._gamma * self._inv_std / gy.dtype.type(m), nd)
            gx = gy * gy.dtype.type(m)  # coeff * (m * gy - gbeta - xhat * ggamma), in place
            gx -= _per_channel(gbeta, nd)
            gx -= xhat * _per_channel(ggamma, nd)
            gx *= coeff
        return gx, (ggamma if self.needs[1] else None), (gbeta if self.needs[2] else None)

    def _backward_rows(self, gy, rows, xhat_rows):
        """The compiled backward (:func:`.loops.batch_norm_backward`): ``ggamma`` and ``gbeta`` in
        one pass, then ``gx`` in ``gy``'s layout."""
        c, m, dtype = rows.shape[0], rows.shape[1], gy.dtype
        coeff = self._gamma * self._inv_std / dtype.type(m)
        ggamma, gbeta, gx = numpy.empty(c, dtype), numpy.empty(c, dtype), numpy.empty_like(rows)
        jit.launch(loops.batch_norm_backward, rows.size, rows, xhat_rows, coeff, gx, ggamma, gbeta)
        return ((self._like(gy, gx) if self.needs[0] else None), (ggamma if self.needs[1] else None),
                (gbeta if self.needs[2] else None))


class FixedBatchNormalization(Function):
    """Evaluation-mode batch normalisation; see :func:`fixed_batch_normalization`."""

    def __init__(self, eps):
        self.eps = eps

    def forward(self, x, gamma, beta, mean, var):
        _check_params(x, gamma, beta, 1)
        xp, nd = array_module(x), x.ndim
        self._inv_std = 1 / xp.sqrt(var + x.dtype.type(self.eps))
        self._xhat = (x - _per_channel(mean, nd)) * _per_channel(self._inv_std, nd)
        self._gamma = gamma
        return self._xhat * _per_channel(gamma, nd) + _per_channel(beta, nd)

    def backward(self, gy):
        needs, nd = self.needs, gy.ndim
        axes = _channel_axes(nd)
        gamma, inv_std = self._gamma, self._inv_std
        gbeta = gy.sum(axis=axes)
        ggamma = (gy * self._xhat).sum(axis=axes)
        gx = gy * _per_channel(gamma * inv_std, nd) if needs[0] else None
        gmean = -gamma * inv_std * gbeta if needs[3] else None
        gvar = gamma.dtype.type(-0.5) * gamma * ggamma * inv_std * inv_std if needs[4] else None
        return gx, (ggamma if needs[1] else None), (gbeta if needs[2] else None), gmean, gvar


class LayerNormalization(Function):
    """Layer normalisation over the last axis; see :func:`layer_normalization`."""

    def __init__(self, eps):
        self.eps = eps

    def forward(self, x, gamma, beta):
        _check_params(x, gamma, beta, -1)
        xp = array_module(x)
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        self._inv_std = 1 / xp.sqrt(var + x.dtype.type(self.eps))
        self._xhat = (x - mean) * self._inv_std
        self._gamma = gamma
        return self._xhat * gamma + beta

    def backward(self, gy):
        xhat = self._xhat
        lead = tuple(range(gy.ndim - 1))
        gx = None
        if self.needs[0]:
            c = gy.shape[-1]
            g = gy * self._gamma
            inner = c * g - g.sum(axis=-1, keepdims=True) - xhat * (g * xhat).sum(axis=-1, keepdims=True)
            gx = self._inv_std / gy.dtype.type(c) * inner
        ggamma = (gy * xhat).sum(axis=lead) if self.needs[1] else None
        gbeta = gy.sum(axis=lead) if self.needs[2] else None
        return gx, ggamma, gbeta


def batch_normalization(x, gamma, beta, eps=2e-5, running_mean=None, running_var=None, decay=0.9) -> Variable:
    """Batch normalisation in training mode (Chainer's ``F.batch_normalization``).

    ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` where ``mean`` and ``var`` (biased) are
    taken over every axis of ``x`` but axis 1, the channels: ``x`` of shape ``(N, C)`` or
    ``(N, C, H, W)``; ``gamma`` and ``beta`` have shape ``(C,)``. Gradients flow to ``x`` (through
    the batch statistics), ``gamma`` and ``beta``.

    ``running_mean`` and ``running_var``, plain ``(C,)`` arrays when given, are updated in place as
    Chainer does: ``running_mean = decay * running_mean + (1 - decay) * mean`` and
    ``running_var = decay * running_var + (1 - decay) * var * m / (m - 1)`` (the unbiased variance;
    ``m`` is the number of elements per channel, ``N * H * W``).
    """
    return BatchNormalization(eps, running_mean, running_var, decay)(x, gamma, beta)


def fixed_batch_normalization(x, gamma, beta, mean, var, eps=2e-5) -> Variable:
    """Batch normalisation with given statistics (evaluation mode; Chainer's
    ``F.fixed_batch_normalization``).

    ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` with ``gamma``, ``beta``, ``mean`` and
    ``var`` of shape ``(C,)`` broadcast along axis 1 of ``x``. Gradients flow to all five inputs
    (usually ``mean`` and ``var`` are constants, the running statistics).
    """
    return FixedBatchNormalization(eps)(x, gamma, beta, mean, var)


def layer_normalization(x, gamma, beta, eps=1e-5) -> Variable:
    """Layer normalisation (Chainer's ``F.layer_normalization``, whose ``x`` is ``(N, C)``).

    Each sample is normalised over the last axis: ``y = (x - mean) / sqrt(var + eps) * gamma +
    beta`` with the (biased) mean and variance of ``x[..., :]``; ``gamma`` and ``beta`` have the
    shape ``(C,)`` of that axis. Gradients flow to ``x``, ``gamma`` and ``beta``.
    """
    return LayerNormalization(eps)(x, gamma, beta)
