"""A small GPT (nanoGPT's ``model.py``): learned token and position embeddings, pre-LayerNorm
transformer blocks and a language-model head, optionally tied to the token embedding."""

from __future__ import annotations

import math

import numpy

from .. import functions as F
from ..backend import Backend, array_module
from ..errors import ConfigError, check
from ..layers import Dropout, Embedding, KVCache, LayerNorm, Linear, MultiHeadSelfAttention, Sequential
from ..module import Module
from . import generation
from .base import Model, sequence_metrics

INIT_STD = 0.02
"""nanoGPT's standard deviation of every Linear and Embedding weight."""


def redraw(backend: Backend, param, std: float) -> None:
    """Replaces ``param``'s values by normal(0, ``std``) values drawn in float64 from the
    backend's generator (the run's model stream), so a seed fixes them."""
    values = backend.rng.standard_normal(param.data.shape, dtype=numpy.float64) * std
    param.data = backend.asarray(values, dtype=param.data.dtype)


class MLP(Module):
    """The block's feed-forward part: ``c_fc`` (``n_embd`` to ``4 * n_embd``), GELU (the tanh
    approximation, GPT-2's), ``c_proj`` back to ``n_embd``, then dropout in training mode."""

    def __init__(self, n_embd: int, backend: Backend, bias: bool, dropout: float, dtype):
        self.c_fc = Linear(n_embd, 4 * n_embd, backend, dtype, bias=bias)
        self.c_proj = Linear(4 * n_embd, n_embd, backend, dtype, bias=bias)
        self.dropout = Dropout(dropout, backend)

    def __call__(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x, n_batch_axes=2)), n_batch_axes=2))


class Block(Module):
    """A pre-LayerNorm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, n_embd: int, n_head: int, backend: Backend, bias: bool, dropout: float, dtype):
        self.ln_1 = LayerNorm(n_embd, backend, dtype=dtype)
        self.attn = MultiHeadSelfAttention(n_embd, n_head, backend, bias=bias, dropout=dropout,
                                           dtype=dtype)
        self.ln_2 = LayerNorm(n_embd, backend, dtype=dtype)
        self.mlp = MLP(n_embd, backend, bias, dropout, dtype)

    def __call__(self, x, cache: KVCache | None = None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class GPT(Model):
    """nanoGPT's GPT over token ids ``(B, T)``, ``T`` at most ``block_size``.

    The tree: ``wte/W`` ``(vocab_size, n_embd)`` and ``wpe/W`` ``(block_size, n_embd)``, dropout on
    their sum, ``n_layer`` :class:`Block` s ``h/0`` ... (``ln_1``, ``attn`` causal multi-head
    self-attention, ``ln_2``, ``mlp``), ``ln_f``, and the head: with ``tie_weights`` the logits are
    ``h @ wte/W.T`` (one parameter serving both, its gradient the sum of both uses), else
    ``lm_head/W`` ``(vocab_size, n_embd)``, a Linear without bias. ``bias=False`` leaves the
    blocks' Linears without bias (the LayerNorms keep their shift ``beta``).

    Initial values as nanoGPT's: every Linear and Embedding weight normal(0, 0.02), every
    ``c_proj`` weight (the residual projections) normal(0, 0.02 / sqrt(2 * n_layer)), biases 0,
    LayerNorm scale 1 and shift 0; drawn from the backend's generator, so a seed fixes them.

    ``model(ids, targets)`` returns the mean cross entropy over every position whose target is
    not -1 (``loss``) and the fraction of positions predicted (``accuracy``).

    Raises:
        ConfigError: when ``n_head`` does not divide ``n_embd``, and when called on more than
            ``block_size`` tokens.
    """

    def __init__(self, vocab_size: int, backend: Backend, block_size: int = 64, n_layer: int = 4,
                 n_head: int = 4, n_embd: int = 128, dropout: float = 0.0, bias: bool = True,
                 tie_weights: bool = True, dtype="float32"):
        for name, value in (("vocab_size", vocab_size), ("block_size", block_size),
                            ("n_layer", n_layer), ("n_head", n_head), ("n_embd", n_embd)):
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                  f"model.{name} must be a positive integer, got {value!r}")
        self.block_size, self.tie_weights = block_size, tie_weights
        self.wte = Embedding(vocab_size, n_embd, backend, dtype)
        self.wpe = Embedding(block_size, n_embd, backend, dtype)
        self.drop = Dropout(dropout, backend)
        self._blocks = [Block(n_embd, n_head, backend, bias, dropout, dtype) for _ in range(n_layer)]
        self.h = Sequential(*self._blocks)
        self.ln_f = LayerNorm(n_embd, backend, dtype=dtype)
        self.lm_head = None if tie_weights else Linear(n_embd, vocab_size, backend, dtype, bias=False)
        residual_std = INIT_STD / math.sqrt(2 * n_layer)
        for path, p in self.params().items():
            if path.endswith("/W"):
                redraw(backend, p, residual_std if path.endswith("c_proj/W") else INIT_STD)

    def new_cache(self) -> list[KVCache]:
        """An empty key/value cache for :meth:`forward`: one :class:`KVCache` per block."""
        return [KVCache() for _ in self._blocks]

    def forward(self, ids, cache: list[KVCache] | None = None):
        """The logits ``(B, T, vocab_size)`` of the next token after each position of ``ids``.

        With ``cache`` (from :meth:`new_cache`), ``ids`` are the tokens after those already
        cached, at positions ``len(cache[0])`` onwards (their positional embeddings), and each
        block's cache takes their keys and values: the logits equal those of one call on the
        whole sequence."""
        start = len(cache[0]) if cache else 0
        t = ids.shape[1]
        if start + t > self.block_size:
            raise ConfigError(f"a sequence of {start + t} tokens is longer than the model's block_size="
                              f"{self.block_size}; give at most {self.block_size} tokens (or train "
                              "with a larger model.block_size)")
        x = self.drop(self.wte(ids) + F.get_item(self.wpe.W, slice(start, start + t)))
        for block, block_cache in zip(self._blocks, cache or [None] * len(self._blocks)):
            x = block(x, block_cache)
        x = self.ln_f(x)
        if self.lm_head is None:
            return F.linear(x, self.wte.W, n_batch_axes=2)
        return self.lm_head(x, n_batch_axes=2)

    def __call__(self, ids, targets):
        return sequence_metrics(self.forward(ids), targets)

    def next_logits(self, ids, caches: list[KVCache] | None = None):
        """The logits ``(B, V)`` of the token after ``ids`` (host int64 ``(B, T)``, the whole
        sequence so far) and the caches for the next call
        (:func:`.generation.generate`'s protocol). With ``caches`` (:meth:`new_cache`) only the
        tokens after those cached run; None runs the last ``block_size`` tokens uncached. Once
        the sequence is longer than ``block_size`` the context is cropped to its last
        ``block_size`` tokens, as nanoGPT does, and that step and every later one run uncached
        (cropping shifts every position, so cached keys no longer apply)."""
        if caches is not None and ids.shape[1] > self.block_size:
            caches = None
        feed = ids[:, -self.block_size:] if caches is None else ids[:, len(caches[0]):]
        xp = array_module(self.wte.W.data)
        return self.forward(xp.asarray(feed), caches).data[:, -1], caches

    def generate(self, ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 rng: numpy.random.Generator | None = None, cache: bool = True) -> numpy.ndarray:
        """``ids`` ``(B, T)`` followed by ``max_new_tokens`` sampled tokens, a host NumPy int64
        array (:func:`.generation.generate`, nanoGPT's ``generate``). With ``cache`` the first
        step runs the whole prompt and each later step one position, against the blocks'
        key/value caches (:meth:`next_logits`); cached and uncached generation draw the same
        ids."""
        return generation.generate(self, ids, max_new_tokens, temperature, top_k, rng,
                                   self.new_cache() if cache else None)
