"""PyTorch CPU eager peer of the text models: nanoGPT's ``model.py`` and an LSTM language model
on ``torch.nn.LSTM``, trained on a token array with the ``char_gpt`` recipe.

- :class:`GPT` is nanoGPT's model (``model.py``): token and learned position embeddings,
  pre-LayerNorm blocks whose attention calls ``F.scaled_dot_product_attention(is_causal=True)``,
  a 4x MLP, ``ln_f`` and the head tied to ``wte``; nanoGPT's initialization (normal(0, 0.02),
  the ``c_proj`` weights at 0.02 / sqrt(2 n_layer)). One change: the GELU is the tanh
  approximation (``nn.GELU(approximate="tanh")``), the one trainer-run computes (nanoGPT's
  ``nn.GELU()`` is the exact erf form).
- :class:`LSTMLanguageModel`: ``nn.Embedding``, ``nn.LSTM(batch_first=True)`` and ``nn.Linear``.
- :func:`train`: nanoGPT's ``train.py`` loop on a CPU: batches of ``block_size`` windows at
  offsets drawn with ``torch.randint``, AdamW (weight decay on the parameters of two or more
  axes only, nanoGPT's ``configure_optimizers``; not fused, as nanoGPT on a CPU), the learning
  rate of ``get_lr`` (linear warm-up, cosine to ``min_lr``), ``clip_grad_norm_``. Every
  ``eval_interval`` iterations and at the end it measures the validation loss as trainer-run
  does: the mean over every predicted token of the validation split in consecutive,
  non-overlapping blocks of ``block_size``. It returns those losses and the training rate.

Run in the PyTorch virtual environment (``peers.torch_python``), it trains on a ``.npy`` token
array and prints one line of JSON (``tokens_per_s`` over the timed window, ``max_rss``: the
process's peak resident set from ``getrusage``, and the validation losses)::

    python benchmarks/torch_text_peer.py TOKENS.npy --model gpt --iterations 200 --warmup 20
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time

import numpy
import torch
from torch import nn
from torch.nn import functional as F

CHAR_GPT = {"block_size": 64, "batch_size": 12, "n_layer": 4, "n_head": 4, "n_embd": 128,
            "dropout": 0.0, "bias": True, "learning_rate": 1e-3, "betas": (0.9, 0.99),
            "weight_decay": 0.1, "warmup_iters": 100, "lr_decay_iters": 2000, "min_lr": 1e-4,
            "grad_clip": 1.0}
"""nanoGPT's ``shakespeare_char`` recipe at its CPU size, trainer-run's ``char_gpt``."""


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm, with an optional bias."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = MLP(n_embd, dropout, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT: ``forward(idx, targets)`` returns the logits and the mean cross entropy
    (targets of -1 ignored)."""

    def __init__(self, vocab_size, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0,
                 bias=True):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, dropout, bias) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class LSTMLanguageModel(nn.Module):
    """An embedding, ``nn.LSTM`` of ``num_layers`` layers (``dropout`` between them) from a zero
    state, and a linear head."""

    def __init__(self, vocab_size, n_embd=128, hidden_size=512, num_layers=2, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, n_embd)
        self.lstm = nn.LSTM(n_embd, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, idx, targets):
        hs, _ = self.lstm(self.embed(idx))
        logits = self.head(hs)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def learning_rate(it: int, recipe: dict) -> float:
    """nanoGPT's ``get_lr``: linear warm-up over ``warmup_iters``, then cosine from
    ``learning_rate`` to ``min_lr`` at ``lr_decay_iters``, ``min_lr`` after."""
    lr, warmup, decay, min_lr = (recipe["learning_rate"], recipe["warmup_iters"],
                                 recipe["lr_decay_iters"], recipe["min_lr"])
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def optimizer(model: nn.Module, recipe: dict) -> torch.optim.AdamW:
    """nanoGPT's ``configure_optimizers`` on a CPU: weight decay on the parameters of two or more
    axes, none on the others, AdamW not fused."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": recipe["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=recipe["learning_rate"], betas=recipe["betas"])


@torch.no_grad()
def validation_loss(model: nn.Module, val: numpy.ndarray, block_size: int, batch_size: int) -> float:
    """The mean cross entropy over every predicted token of ``val`` in consecutive blocks of
    ``block_size`` (the tokens after the last full block not predicted), in evaluation mode."""
    model.eval()
    n = (len(val) - 1) // block_size
    ids = torch.from_numpy(val[:n * block_size].astype(numpy.int64)).view(n, block_size)
    targets = torch.from_numpy(val[1:n * block_size + 1].astype(numpy.int64)).view(n, block_size)
    total = 0.0
    for start in range(0, n, batch_size):
        _, loss = model(ids[start:start + batch_size], targets[start:start + batch_size])
        total += loss.item() * ids[start:start + batch_size].numel()
    model.train()
    return total / (n * block_size)


def build(name: str, vocab_size: int, recipe: dict) -> nn.Module:
    if name == "gpt":
        return GPT(vocab_size, recipe["block_size"], recipe["n_layer"], recipe["n_head"],
                   recipe["n_embd"], recipe["dropout"], recipe["bias"])
    return LSTMLanguageModel(vocab_size, recipe["n_embd"], recipe["hidden_size"],
                             recipe["num_layers"], recipe["dropout"])


def train(tokens: numpy.ndarray, model: str = "gpt", iterations: int = 2000,
          eval_interval: int = 250, val_fraction: float = 0.1, seed: int = 0,
          vocab_size: int | None = None, warmup: int = 0, **recipe) -> dict:
    """Trains ``model`` (``"gpt"`` or ``"lstm_lm"``) on the 1-D ``tokens`` for ``iterations``
    iterations with :data:`CHAR_GPT` updated by ``recipe`` (``lstm_lm`` also takes
    ``hidden_size`` and ``num_layers``). The last ``val_fraction`` of the tokens is the
    validation split (nanoGPT's ``int(n * 0.9)``).

    Returns ``{"val_loss": [[iteration, loss], ...], "tokens_per_s": ...}``: the validation
    loss after every ``eval_interval`` iterations and after the last (none with
    ``eval_interval=0``), and the training tokens per second from iteration ``warmup`` to the
    end, evaluations left out."""
    recipe = {**CHAR_GPT, "hidden_size": 512, "num_layers": 2, **recipe}
    torch.manual_seed(seed)
    n = int(len(tokens) * (1 - val_fraction))
    train_ids = torch.from_numpy(numpy.asarray(tokens[:n], dtype=numpy.int64))
    val = numpy.asarray(tokens[n:])
    vocab = int(tokens.max()) + 1 if vocab_size is None else vocab_size
    net = build(model, vocab, recipe)
    opt = optimizer(net, recipe)
    block, batch = recipe["block_size"], recipe["batch_size"]
    span = torch.arange(block)
    losses, timed, began = [], 0.0, None
    net.train()
    for it in range(iterations):
        if it == warmup:
            began = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = learning_rate(it, recipe)
        rows = torch.randint(len(train_ids) - block, (batch,))[:, None] + span
        x, y = train_ids[rows], train_ids[rows + 1]
        _, loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if recipe["grad_clip"]:
            torch.nn.utils.clip_grad_norm_(net.parameters(), recipe["grad_clip"])
        opt.step()
        loss.item()
        done = it + 1
        if eval_interval and (done % eval_interval == 0 or done == iterations) and len(val) > block:
            paused = time.perf_counter()
            losses.append([done, validation_loss(net, val, block, batch)])
            if began is not None:
                timed -= time.perf_counter() - paused
    if began is not None:
        timed += time.perf_counter() - began
    rate = (iterations - warmup) * batch * block / timed if began is not None and timed > 0 else None
    return {"val_loss": losses, "tokens_per_s": rate}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tokens", help="a .npy array of token ids")
    p.add_argument("--model", choices=["gpt", "lstm_lm"], default="gpt")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20, help="iterations before the timed window")
    p.add_argument("--eval-interval", type=int, default=0)
    p.add_argument("--vocab-size", type=int)
    for key in ("block_size", "batch_size", "n_layer", "n_head", "n_embd", "hidden_size",
                "num_layers"):
        p.add_argument("--" + key.replace("_", "-"), type=int, help="over CHAR_GPT's")
    args = p.parse_args()
    recipe = {key: value for key, value in vars(args).items()
              if key in (*CHAR_GPT, "hidden_size", "num_layers") and value is not None}
    tokens = numpy.load(args.tokens, mmap_mode="r")
    result = train(tokens, args.model, args.iterations, args.eval_interval,
                   vocab_size=args.vocab_size, warmup=args.warmup, **recipe)
    result["max_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["threads"] = torch.get_num_threads()
    result["version"] = torch.__version__
    print(json.dumps(result))


if __name__ == "__main__":
    main()
