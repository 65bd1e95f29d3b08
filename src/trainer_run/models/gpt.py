"""A small GPT (nanoGPT's ``model.py``): learned token and position embeddings, pre-LayerNorm
transformer blocks and a language-model head, optionally tied to the token embedding."""

from __future__ import annotations

import math

import numpy

from .. import functions as F
from .. import host_reads
from ..autograd import no_grad
from ..backend import Backend, array_module
from ..errors import ConfigError, check
from ..layers import Dropout, Embedding, KVCache, LayerNorm, Linear, MultiHeadSelfAttention, Sequential
from ..module import Module, evaluating
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

    def generate(self, ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 rng: numpy.random.Generator | None = None, cache: bool = True) -> numpy.ndarray:
        """``ids`` ``(B, T)`` followed by ``max_new_tokens`` sampled tokens, a host NumPy int64
        array ``(B, T + max_new_tokens)`` (nanoGPT's ``generate``).

        Runs in evaluation mode (the model's mode is restored after) and records no graph. Each
        step takes the logits of the last position, divides them by ``temperature``, keeps the
        ``top_k`` largest (every logit equal to the ``top_k``-th too; the rest get probability 0)
        when given, and softmaxes them (:func:`next_token_probabilities`); the ``(B, V)``
        probabilities are read to the host and one id per row is drawn by :func:`sample` from
        ``rng`` (None: a fresh ``numpy.random.default_rng()``, different each call; give a
        seeded generator for repeatable ids).

        With ``cache`` the first step runs the whole prompt and each later step one position,
        against the blocks' key/value caches. Once the sequence is longer than ``block_size``
        the context is cropped to its last ``block_size`` tokens, as nanoGPT does, and that
        step and every later one run the whole cropped context uncached (cropping shifts every
        position, so cached keys no longer apply). Cached and uncached generation draw the
        same ids.

        Raises:
            ConfigError: for ``temperature <= 0``, ``top_k < 1``, ``max_new_tokens < 0`` and
                an empty prompt.
        """
        check(isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool)
              and max_new_tokens >= 0,
              f"max_new_tokens must be an integer of at least 0, got {max_new_tokens!r}; "
              "give max_new_tokens >= 0")
        check(isinstance(temperature, (int, float)) and temperature > 0,
              f"temperature must be above 0, got {temperature!r}; give temperature > 0 "
              "(1.0 samples the model's own probabilities, lower is greedier)")
        check(top_k is None or (isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= 1),
              f"top_k must be an integer of at least 1, got {top_k!r}; give top_k >= 1 (or None "
              "to keep every token)")
        ids = numpy.array(host_reads.array(ids), dtype=numpy.int64)
        check(ids.ndim == 2 and ids.shape[0] >= 1 and ids.shape[1] >= 1,
              f"the prompt must be token ids of shape (batch, T) with T >= 1, got shape {ids.shape}; "
              "give at least one token per row")
        rng = numpy.random.default_rng() if rng is None else rng
        xp = array_module(self.wte.W.data)
        caches = self.new_cache() if cache else None
        with evaluating(self), no_grad():
            for _ in range(max_new_tokens):
                if caches is not None and ids.shape[1] > self.block_size:
                    caches = None
                if caches is None:
                    feed = ids[:, -self.block_size:]
                else:
                    feed = ids[:, len(caches[0]):]
                logits = self.forward(xp.asarray(feed), caches).data[:, -1]
                probs = host_reads.array(next_token_probabilities(logits, temperature, top_k))
                ids = numpy.concatenate([ids, sample(probs, rng)[:, None]], axis=1)
        return ids


def next_token_probabilities(logits, temperature: float = 1.0, top_k: int | None = None):
    """The sampling probabilities ``(B, V)`` (float64, on the logits' device) from the last
    position's ``logits`` ``(B, V)``: ``logits / temperature``; with ``top_k``, every logit below
    the ``top_k``-th largest of its row becomes -inf (``top_k`` above ``V`` keeps all); then a
    softmax with the row's maximum subtracted."""
    xp = array_module(logits)
    z = logits.astype(xp.float64) / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = xp.sort(z, axis=-1)[:, -top_k][:, None]
        z = xp.where(z < kth, -math.inf, z)
    e = xp.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sample(probs: numpy.ndarray, rng: numpy.random.Generator) -> numpy.ndarray:
    """One id per row of ``probs`` ``(B, V)`` (host arrays), by the inverse of the cumulative
    distribution at ``u = rng.random(B)``: the first id whose cumulative probability exceeds ``u``
    times the row's total (an id of probability 0 is never drawn)."""
    cdf = numpy.cumsum(probs, axis=-1)
    threshold = rng.random(len(probs)) * cdf[:, -1]
    return (cdf <= threshold[:, None]).sum(axis=-1)
