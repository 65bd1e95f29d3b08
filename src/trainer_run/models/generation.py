"""Sampling tokens from a language model, one at a time (nanoGPT's ``generate``).

:func:`generate` works with any model that has ``next_logits(ids, state)``: given the whole
sequence so far (host int64 ids ``(B, T)``) and what it kept from the last call (None on the
first), it returns the logits ``(B, V)`` of the token after the last position and what to keep
for the next call: the GPT its key/value caches (:meth:`.gpt.GPT.next_logits`), the LSTM
language model its recurrent state (:meth:`.lstm_lm.LSTMLanguageModel.next_logits`), so each
new token runs one position.
"""

from __future__ import annotations

import math

import numpy

from .. import host_reads
from ..autograd import no_grad
from ..backend import array_module
from ..errors import check
from ..module import evaluating


def generate(model, ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             rng: numpy.random.Generator | None = None, state=None) -> numpy.ndarray:
    """``ids`` ``(B, T)`` followed by ``max_new_tokens`` tokens sampled from ``model``, a host
    NumPy int64 array ``(B, T + max_new_tokens)``.

    Runs in evaluation mode (the model's mode is restored after) and records no graph. Each
    step takes the logits of the last position, divides them by ``temperature``, keeps the
    ``top_k`` largest (every logit equal to the ``top_k``-th too; the rest get probability 0)
    when given, and softmaxes them (:func:`next_token_probabilities`); the ``(B, V)``
    probabilities are read to the host and one id per row is drawn by :func:`sample` from
    ``rng`` (None: a fresh ``numpy.random.default_rng()``, different each call; give a seeded
    generator for repeatable ids). ``state`` is the model's first ``next_logits`` state.

    Raises:
        ConfigError: for ``temperature <= 0``, ``top_k < 1``, ``max_new_tokens < 0`` and an
            empty prompt.
    """
    check(_whole(max_new_tokens) and max_new_tokens >= 0,
          f"max_new_tokens must be an integer of at least 0, got {max_new_tokens!r}; "
          "give max_new_tokens >= 0")
    check(isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
          and temperature > 0,
          f"temperature must be above 0, got {temperature!r}; give temperature > 0 "
          "(1.0 samples the model's own probabilities, lower is greedier)")
    check(top_k is None or (_whole(top_k) and top_k >= 1),
          f"top_k must be an integer of at least 1, got {top_k!r}; give top_k >= 1 (or None "
          "to keep every token)")
    ids = numpy.array(host_reads.array(ids), dtype=numpy.int64)
    check(ids.ndim == 2 and ids.shape[0] >= 1 and ids.shape[1] >= 1,
          f"the prompt must be token ids of shape (batch, T) with T >= 1, got shape {ids.shape}; "
          "give at least one token per row")
    rng = numpy.random.default_rng() if rng is None else rng
    with evaluating(model), no_grad():
        for _ in range(int(max_new_tokens)):
            logits, state = model.next_logits(ids, state)
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
        kth = xp.sort(z, axis=-1)[:, -int(top_k)][:, None]
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


def _whole(value) -> bool:
    return isinstance(value, (int, numpy.integer)) and not isinstance(value, bool)
