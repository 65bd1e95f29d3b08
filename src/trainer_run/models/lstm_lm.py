"""A recurrent language model: a token embedding, stacked LSTM layers and a linear head."""

from __future__ import annotations

import numpy

from .. import functions as F
from ..backend import Backend, array_module
from ..errors import check
from ..layers import LSTM, Embedding, Linear
from ..params import Parameter
from . import generation
from .base import Model, sequence_metrics


class LSTMLanguageModel(Model):
    """An LSTM language model over token ids ``(B, T)``.

    The tree: ``embed/W`` ``(vocab_size, n_embd)`` (standard normal), ``lstm`` (``num_layers``
    :class:`~trainer_run.layers.LSTM` layers of ``hidden_size`` units, ``dropout`` between them in
    training mode only; Chainer's initial values) from a zero state, and the head
    ``head/W`` ``(vocab_size, hidden_size)`` with ``head/b`` (LeCun normal, zero bias). With
    ``tie_weights`` the head's matrix is ``embed/W`` itself (one parameter, its gradient the sum
    of both uses) and its only own parameter is the zero bias ``head_b``; that needs
    ``hidden_size == n_embd``.

    ``model(ids, targets)`` returns the mean cross entropy over every position whose target is
    not -1 (``loss``) and the fraction of positions predicted (``accuracy``).

    Raises:
        ConfigError: when ``tie_weights`` is asked with ``hidden_size != n_embd``.
    """

    def __init__(self, vocab_size: int, backend: Backend, n_embd: int = 128, hidden_size: int = 256,
                 num_layers: int = 2, dropout: float = 0.0, tie_weights: bool = False,
                 dtype="float32"):
        check(not tie_weights or hidden_size == n_embd,
              f"model.tie_weights needs model.hidden_size equal to model.n_embd, got {hidden_size} "
              f"and {n_embd}; set them equal, or tie_weights=false")
        self.embed = Embedding(vocab_size, n_embd, backend, dtype)
        self.lstm = LSTM(n_embd, hidden_size, backend, num_layers=num_layers, dropout=dropout,
                         dtype=dtype)
        if tie_weights:
            self.head_b = Parameter(backend.asarray(numpy.zeros(vocab_size), dtype=dtype))
        else:
            self.head = Linear(hidden_size, vocab_size, backend, dtype)

    def forward(self, ids):
        """The logits ``(B, T, vocab_size)`` of the next token after each position of ``ids``."""
        hs, _ = self.lstm(self.embed(ids))
        W, bias = (self.head.W, self.head.b) if hasattr(self, "head") else (self.embed.W, self.head_b)
        return F.linear(hs, W, bias, n_batch_axes=2)

    def __call__(self, ids, targets):
        return sequence_metrics(self.forward(ids), targets)

    def next_logits(self, ids, state=None):
        """The logits ``(B, V)`` of the token after ``ids`` (host int64 ``(B, T)``, the whole
        sequence so far) and the state for the next call (:func:`.generation.generate`'s
        protocol): the LSTM's state after the tokens seen and their count, so a call runs only
        the tokens after them (None: from the start, a zero state)."""
        carried, seen = (None, 0) if state is None else state
        xp = array_module(self.embed.W.data)
        hs, carried = self.lstm(self.embed(xp.asarray(ids[:, seen:])), carried)
        W, bias = (self.head.W, self.head.b) if hasattr(self, "head") else (self.embed.W, self.head_b)
        last = F.get_item(hs, (slice(None), slice(-1, None)))
        return F.linear(last, W, bias, n_batch_axes=2).data[:, -1], (carried, ids.shape[1])

    def generate(self, ids, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 rng: numpy.random.Generator | None = None) -> numpy.ndarray:
        """``ids`` ``(B, T)`` followed by ``max_new_tokens`` sampled tokens, a host NumPy int64
        array (:func:`.generation.generate`); each new token runs one step of the LSTM from the
        state the sequence before it left (:meth:`next_logits`)."""
        return generation.generate(self, ids, max_new_tokens, temperature, top_k, rng)
