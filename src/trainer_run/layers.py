"""Parameterised layers: :class:`~trainer_run.models.Module` subclasses holding their
parameters (and persistent state) under paths in the model tree, built on
:mod:`trainer_run.functions`.

Initial values follow Chainer's defaults and are drawn from the backend's generator (the
run's model stream): LeCun normal weights (std ``1/sqrt(fan_in)``) and zero biases for
``Linear``, ``Conv2D`` and the recurrent ``LSTM`` and ``GRU`` (whose LSTM forget gates start at
1, as Chainer's ``L.LSTM``), standard normal embeddings, batch and layer normalization's scale
1 and shift 0. Every layer runs on the backend's array module (NumPy or CuPy).

Every parameter and persistent array is made by :func:`_normal` or :func:`_constant`, which
first check its memory (:data:`BYTES_PER_VALUE` bytes a value: the float64 draw, the value,
its gradient and its packed copy, :mod:`trainer_run.params`) against the machine's available
memory (:func:`trainer_run.memory.check_fits`): a layer too large is refused in one line
(``model: ...``) before anything is allocated.
"""

from __future__ import annotations

import math

import numpy

from . import functions as F
from .backend import Backend
from .errors import check
from .functions import linear
from .memory import check_fits
from .module import Module
from .params import Parameter, Persistent

BYTES_PER_VALUE = 8 + 3 * 4
"""The memory a float32 parameter value takes while it is made and trained: its float64
initial draw, then the value, its gradient and its packed copy."""


def _check_fits(shape: tuple, dtype) -> None:
    """Refuses a parameter of ``shape`` the machine's available memory cannot hold."""
    count = math.prod(shape)
    extra = 3 * (numpy.dtype(dtype).itemsize - 4)
    check_fits(count * (BYTES_PER_VALUE + extra), f"model: a parameter of shape {tuple(shape)} "
               f"({count:,} {numpy.dtype(dtype).name} values, with its gradient)",
               "lower the model's sizes (model.hidden_sizes, model.channels)")


def _normal(backend: Backend, shape: tuple, std: float, dtype):
    """A parameter of normal values with standard deviation ``std``, drawn in float64 from the
    backend's generator."""
    _check_fits(shape, dtype)
    values = backend.rng.standard_normal(shape, dtype=numpy.float64) * std
    return Parameter(backend.asarray(values, dtype=dtype))


def _constant(backend: Backend, shape: tuple, value: float, dtype, kind=Parameter):
    """A parameter (or ``kind``, e.g. :class:`Persistent`) holding ``value`` everywhere."""
    _check_fits(shape, dtype)
    return kind(backend.asarray(numpy.full(shape, value), dtype=dtype))


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


class Linear(Module):
    """``y = x @ W.T + b``; W is LeCun-normal (std ``1/sqrt(in_size)``), b is zero (None with
    ``bias=False``)."""

    def __init__(self, in_size: int, out_size: int, backend: Backend, dtype="float32",
                 bias: bool = True):
        self.W = _normal(backend, (out_size, in_size), 1.0 / math.sqrt(in_size), dtype)
        self.b = _constant(backend, (out_size,), 0.0, dtype) if bias else None

    def __call__(self, x, n_batch_axes: int = 1):
        return linear(x, self.W, self.b, n_batch_axes)


class Conv2D(Module):
    """A 2-D convolution: ``W`` of shape ``(out_channels, in_channels / groups, kh, kw)`` and
    ``b`` of ``(out_channels,)`` (None with ``bias=False``), applied by
    :func:`trainer_run.functions.convolution_2d`. ``pad="same"`` pads odd kernels so that a
    stride of 1 keeps the height and width (``dilate * (k - 1) / 2`` on each side)."""

    def __init__(self, in_channels: int, out_channels: int, ksize, backend: Backend, stride=1,
                 pad=0, dilate=1, groups: int = 1, bias: bool = True, dtype="float32"):
        kh, kw = _pair(ksize)
        check(in_channels % groups == 0 and out_channels % groups == 0,
              f"Conv2D: groups={groups} must divide in_channels={in_channels} and "
              f"out_channels={out_channels}")
        dh, dw = _pair(dilate)
        if pad == "same":
            check(kh % 2 == 1 and kw % 2 == 1, f"Conv2D: pad='same' needs odd kernel sizes, got {ksize}")
            pad = (dh * (kh - 1) // 2, dw * (kw - 1) // 2)
        self.stride, self.pad, self.dilate, self.groups = _pair(stride), _pair(pad), (dh, dw), groups
        fan_in = in_channels // groups * kh * kw
        self.W = _normal(backend, (out_channels, in_channels // groups, kh, kw), 1 / math.sqrt(fan_in),
                         dtype)
        self.b = _constant(backend, (out_channels,), 0.0, dtype) if bias else None

    def __call__(self, x):
        return F.convolution_2d(x, self.W, self.b, stride=self.stride, pad=self.pad,
                                dilate=self.dilate, groups=self.groups)


class BatchNorm(Module):
    """Batch normalization over every axis but the channel axis 1 (Chainer's
    ``BatchNormalization``): in training mode the batch's statistics, and the running
    ``avg_mean`` and ``avg_var`` (persistent) updated with ``decay``; in evaluation mode the
    running statistics. ``gamma`` (1) and ``beta`` (0) are trained."""

    def __init__(self, size: int, backend: Backend, decay: float = 0.9, eps: float = 2e-5,
                 dtype="float32"):
        self.gamma = _constant(backend, (size,), 1.0, dtype)
        self.beta = _constant(backend, (size,), 0.0, dtype)
        self.avg_mean = _constant(backend, (size,), 0.0, dtype, Persistent)
        self.avg_var = _constant(backend, (size,), 1.0, dtype, Persistent)
        self.decay, self.eps = decay, eps

    def __call__(self, x):
        if self.training:
            return F.batch_normalization(x, self.gamma, self.beta, eps=self.eps,
                                         running_mean=self.avg_mean.data,
                                         running_var=self.avg_var.data, decay=self.decay)
        return F.fixed_batch_normalization(x, self.gamma, self.beta, self.avg_mean.data,
                                           self.avg_var.data, eps=self.eps)


class LayerNorm(Module):
    """Layer normalization over the last axis with trained ``gamma`` (1) and ``beta`` (0)."""

    def __init__(self, size: int, backend: Backend, eps: float = 1e-5, dtype="float32"):
        self.gamma = _constant(backend, (size,), 1.0, dtype)
        self.beta = _constant(backend, (size,), 0.0, dtype)
        self.eps = eps

    def __call__(self, x):
        return F.layer_normalization(x, self.gamma, self.beta, eps=self.eps)


class Embedding(Module):
    """A table ``W`` of ``(n_vocab, size)`` vectors looked up by integer ids
    (:func:`trainer_run.functions.embed_id`); standard normal initial values."""

    def __init__(self, n_vocab: int, size: int, backend: Backend, dtype="float32"):
        self.W = _normal(backend, (n_vocab, size), 1.0, dtype)

    def __call__(self, ids):
        return F.embed_id(ids, self.W)


class Dropout(Module):
    """Dropout with ``ratio`` in training mode (masks drawn from the backend's generator, the
    run's seeded model stream, which checkpoints hold, so a resume draws the same masks);
    the identity in evaluation mode."""

    def __init__(self, ratio: float, backend: Backend):
        check(0 <= ratio < 1, f"Dropout: ratio must be in [0, 1), got {ratio}")
        self.ratio = ratio
        self._rng = backend.rng

    def __call__(self, x):
        if not self.training or self.ratio == 0:
            return x
        return F.dropout(x, self.ratio, rng=self._rng)


class Sequential(Module):
    """Layers and functions applied in order. Modules among them are in the tree under
    their position (``0/W``, ``2/gamma``); plain callables (``F.relu``) hold nothing."""

    def __init__(self, *steps):
        self._steps = list(steps)
        for i, step in enumerate(steps):
            if isinstance(step, Module):
                setattr(self, str(i), step)

    def __call__(self, x):
        for step in self._steps:
            x = step(x)
        return x


class KVCache:
    """One attention layer's keys and values of the positions seen so far, ``k`` and ``v``
    ``(batch, heads, T, head_size)`` arrays (None before the first call): given to
    :class:`MultiHeadSelfAttention` call after call, it lets each call feed only the new
    positions. It holds plain arrays, so no gradient flows back into the positions cached: it is
    for inference (generation), under :func:`trainer_run.autograd.no_grad`."""

    def __init__(self):
        self.k = self.v = None

    def __len__(self) -> int:
        """The number of positions cached."""
        return 0 if self.k is None else self.k.shape[2]


class MultiHeadSelfAttention(Module):
    """Multi-head self-attention over ``(batch, T, n_embd)`` (nanoGPT's ``CausalSelfAttention``):
    ``c_attn`` (a :class:`Linear` from ``n_embd`` to ``3 * n_embd``) gives the queries, keys and
    values, in that order along its output; each is split into ``n_head`` heads of
    ``n_embd // n_head``, attended (:func:`~trainer_run.functions.scaled_dot_product_attention`,
    causal unless ``causal=False``), the heads are joined back in order, and ``c_proj`` (a Linear
    from ``n_embd`` to ``n_embd``) projects them. ``bias=False`` leaves both Linears without bias.
    ``dropout`` applies to ``c_proj``'s output in training mode only; the attention weights are
    not dropped.

    ``attn(x, cache)`` with a :class:`KVCache`: ``x`` holds the positions after those cached;
    this call's keys and values are appended to the cache, and its queries attend to every
    cached key (causal: the queries are the last positions). Fed a sequence in pieces, the
    outputs equal one call on the whole sequence.

    Raises:
        ConfigError: when ``n_head`` does not divide ``n_embd``.
    """

    def __init__(self, n_embd: int, n_head: int, backend: Backend, bias: bool = True,
                 dropout: float = 0.0, causal: bool = True, dtype="float32"):
        check(n_embd % n_head == 0,
              f"n_embd={n_embd} is not divisible by n_head={n_head}; choose n_head that divides n_embd")
        self.c_attn = Linear(n_embd, 3 * n_embd, backend, dtype, bias=bias)
        self.c_proj = Linear(n_embd, n_embd, backend, dtype, bias=bias)
        self.resid_dropout = Dropout(dropout, backend)
        self.n_head, self.causal = n_head, causal

    def __call__(self, x, cache: KVCache | None = None):
        b, t, c = x.shape
        qkv = F.reshape(self.c_attn(x, n_batch_axes=2), (b, t, 3, self.n_head, c // self.n_head))
        qkv = F.transpose(qkv, (2, 0, 3, 1, 4))
        q, k, v = (F.get_item(qkv, i) for i in range(3))
        if cache is not None:
            if cache.k is not None:
                k, v = F.concat([cache.k, k], axis=2), F.concat([cache.v, v], axis=2)
            cache.k, cache.v = k.data, v.data
        y = F.scaled_dot_product_attention(q, k, v, causal=self.causal)
        y = F.reshape(F.transpose(y, (0, 2, 1, 3)), (b, t, c))
        return self.resid_dropout(self.c_proj(y, n_batch_axes=2))


class _Recurrent(Module):
    """Stacked recurrent layers, ``0``, ``1``, ... in the tree; ``dropout`` applies to each
    layer's outputs before the next layer, in training mode only (not after the last)."""

    def __init__(self, layers: list, dropout: float, backend: Backend):
        for k, layer in enumerate(layers):
            setattr(self, str(k), layer)
        self._layers = layers
        self.dropout = Dropout(dropout, backend)

    def __call__(self, x, state=None):
        """``(outputs, state)``: the last layer's ``(B, T, H)`` outputs (a Variable) and the new
        per-layer state. ``state`` (None: zeros) is a tuple of one state per layer; the state
        returned is detached (plain arrays), so a loss back-propagates through this call only."""
        layers = self._layers
        state = (None,) * len(layers) if state is None else tuple(state)
        check(len(state) == len(layers),
              f"{type(self).__name__}: state must hold one entry per layer ({len(layers)}), got {len(state)}")
        final = []
        for k, (layer, s) in enumerate(zip(layers, state)):
            x, s = layer(self.dropout(x) if k else x, s)
            final.append(s)
        return x, tuple(final)


class _LSTMLayer(Module):
    def __init__(self, in_size: int, hidden_size: int, backend: Backend, dtype):
        self.W = _normal(backend, (4 * hidden_size, in_size), 1 / math.sqrt(in_size), dtype)
        self.U = _normal(backend, (4 * hidden_size, hidden_size), 1 / math.sqrt(hidden_size), dtype)
        self.b = _constant(backend, (4 * hidden_size,), 0.0, dtype)
        self.b.data[2::4] = 1  # the forget gates, interleaved per unit

    def __call__(self, x, state):
        h, c = (None, None) if state is None else state
        hs, c = F.lstm(x, h, c, self.W, self.U, self.b)
        return hs, (hs.data[:, -1].copy(), c)


class _GRULayer(Module):
    def __init__(self, in_size: int, hidden_size: int, backend: Backend, dtype):
        self.W = _normal(backend, (3 * hidden_size, in_size), 1 / math.sqrt(in_size), dtype)
        self.U = _normal(backend, (3 * hidden_size, hidden_size), 1 / math.sqrt(hidden_size), dtype)
        self.b_x = _constant(backend, (3 * hidden_size,), 0.0, dtype)
        self.b_h = _constant(backend, (3 * hidden_size,), 0.0, dtype)

    def __call__(self, x, h):
        hs = F.gru(x, h, self.W, self.U, self.b_x, self.b_h)
        return hs, hs.data[:, -1].copy()


def _sizes(name: str, in_size: int, hidden_size: int, num_layers: int) -> list:
    check(num_layers >= 1 and hidden_size >= 1,
          f"{name}: num_layers and hidden_size must be at least 1, got {num_layers} and {hidden_size}")
    return [in_size] + [hidden_size] * (num_layers - 1)


class LSTM(_Recurrent):
    """``num_layers`` LSTM layers over ``(batch, time, in_size)`` (:func:`~trainer_run.functions.lstm`,
    Chainer's gates), each layer ``k`` holding ``k/W`` ``(4H, in)``, ``k/U`` ``(4H, H)`` and
    ``k/b`` ``(4H,)``. Initial values follow Chainer's ``L.LSTM``: LeCun-normal ``W`` and ``U``
    (std ``1/sqrt(in)``, ``1/sqrt(H)``), ``b`` zero but 1 for the forget gates. The state is a tuple
    of per-layer ``(h, c)``, each ``(B, H)``."""

    def __init__(self, in_size: int, hidden_size: int, backend: Backend, num_layers: int = 1,
                 dropout: float = 0.0, dtype="float32"):
        sizes = _sizes("LSTM", in_size, hidden_size, num_layers)
        super().__init__([_LSTMLayer(n, hidden_size, backend, dtype) for n in sizes], dropout, backend)


class GRU(_Recurrent):
    """``num_layers`` GRU layers over ``(batch, time, in_size)`` (:func:`~trainer_run.functions.gru`,
    MXNet's gates), each layer ``k`` holding ``k/W`` ``(3H, in)``, ``k/U`` ``(3H, H)``, ``k/b_x``
    and ``k/b_h`` ``(3H,)``. Initial values: LeCun-normal ``W`` and ``U`` (std ``1/sqrt(in)``,
    ``1/sqrt(H)``) and zero biases (MXNet's bias initializer). The state is a tuple of per-layer
    ``h``, each ``(B, H)``."""

    def __init__(self, in_size: int, hidden_size: int, backend: Backend, num_layers: int = 1,
                 dropout: float = 0.0, dtype="float32"):
        sizes = _sizes("GRU", in_size, hidden_size, num_layers)
        super().__init__([_GRULayer(n, hidden_size, backend, dtype) for n in sizes], dropout, backend)


__all__ = ["BatchNorm", "Conv2D", "Dropout", "Embedding", "GRU", "KVCache", "LSTM", "LayerNorm",
           "Linear", "MultiHeadSelfAttention", "Sequential"]
