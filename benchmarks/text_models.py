"""Training throughput of the text models inside a real ``trainer-run``, against PyTorch CPU eager
on the identical model, data, batch and recipe (issue 48, item 7).

The text: ``--chars`` characters drawn uniformly (seed 0) from the 65 characters of nanoGPT's
``shakespeare_char`` vocabulary, so the char tokenizer's vocabulary is 65; the content does not
change the speed. Both sides read the same token ids (the sorted characters, as
``tokenizer=char`` numbers them).

- **trainer-run**: ``trainer-run experiment=char_gpt dataset.path=<text>`` (the GPT: block 64,
  batch 12, 4 layers, 4 heads, 128 wide, dropout 0; AdamW lr 1e-3, betas (0.9, 0.99), weight
  decay 0.1 on the matrices, 100 warm-up iterations then cosine, clipping at global norm 1.0)
  and the same with ``model=lstm_lm`` (its defaults: an embedding of 128, 2 LSTM layers of
  256, a linear head; the same data, batch and recipe), a subprocess with its default
  threads. Its rate is read from ``metrics.jsonl``: the tokens between the rows at the first
  logged iteration from ``--warmup`` on and the last one up to ``--iterations``, over the
  difference of their ``elapsed_s``; the run goes on one more log interval, so that its final
  evaluation (``dataset.val_tokens`` of them) and checkpoint fall outside the window.
- **PyTorch**: ``torch_text_peer.py``: nanoGPT's ``model.py`` (``F.scaled_dot_product_attention``,
  the tanh GELU) and ``torch.nn.LSTM``, nanoGPT's training loop with the same recipe, timed over
  the same iterations, in its own virtual environment (``peers.torch_python``; skipped without
  one), once with each of ``peers.torch_envs()``; the faster counts.

Peak memory is each process's largest resident set (``wait4``'s ``ru_maxrss``). The matmul-only
limit is the tokens per second of the model's matrix products alone: every product of one
training iteration (forward, the gradients of inputs and weights, the attention's batched
products, each LSTM step's), timed back to back in NumPy with its default threads, the best of
five. The load average is printed before and after: on a busy machine the numbers mean little.
Each round runs ours, then the peer; the best of ``--rounds`` counts for each.

    python benchmarks/text_models.py [--models gpt,lstm_lm] [--rounds 2] [--iterations 200]
        [--warmup 20] [--log-interval 10] [--chars 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
from convnets_run import env_label, load, window
from peers import torch_envs, torch_python

CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""The 65 characters of nanoGPT's shakespeare_char, in sorted order."""
BLOCK, BATCH = 64, 12
GPT = {"n_layer": 4, "n_head": 4, "n_embd": 128}
LSTM = {"n_embd": 128, "hidden_size": 256, "num_layers": 2}
TARGET, MEMORY_TARGET = 1.0, 1.5
PEER = Path(__file__).with_name("torch_text_peer.py")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt,lstm_lm")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--iterations", type=int, default=200, help="end of the timed window")
    p.add_argument("--warmup", type=int, default=20, help="iterations before the timed window")
    p.add_argument("--log-interval", type=int, default=10, help="trainer.log_interval of our run")
    p.add_argument("--chars", type=int, default=1_000_000)
    return p.parse_args()


def make_text(folder: Path, n: int) -> tuple[Path, Path]:
    """The text file and its token ids (``.npy``, uint16), as the char tokenizer numbers them."""
    ids = numpy.random.default_rng(0).integers(0, len(CHARS), n).astype(numpy.uint16)
    text = folder / "input.txt"
    text.write_text("".join(numpy.array(list(CHARS))[ids]), encoding="utf-8")
    tokens = folder / "tokens.npy"
    numpy.save(tokens, ids)
    return text, tokens


def run(command: list[str], env: dict, cwd: Path) -> tuple[str, int]:
    """The command's stdout and its peak resident set in bytes; exits on failure."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, text=True, env=env, cwd=cwd)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            sys.exit(f"{' '.join(command)} failed:\n{err.read()[-3000:]}")
        return out.read(), usage.ru_maxrss * 1024


def ours(model: str, text: Path, folder: Path, args) -> tuple[float, int]:
    """Tokens per second of a real run between the rows of ``window``, and its peak memory."""
    start, end = window(args)
    out, last = Path(tempfile.mkdtemp(prefix=f"run-{model}-", dir=folder)), end + args.log_interval
    command = [sys.executable, "-m", "trainer_run.cli", "experiment=char_gpt",
               f"dataset.path={text}", f"dataset.val_tokens={BLOCK * BATCH * 4}",
               f"trainer.max_iterations={last}", f"trainer.log_interval={args.log_interval}",
               f"trainer.eval_interval={last}", f"trainer.checkpoint_interval={last}",
               "trainer.progress=false", f"hydra.run.dir={out}"]
    if model == "lstm_lm":
        command.insert(4, "model=lstm_lm")
    _, peak = run(command, dict(os.environ), folder)
    with open(out / "metrics.jsonl") as f:
        elapsed = {row["iteration"]: row["elapsed_s"] for row in map(json.loads, f)}
    return (end - start) * BATCH * BLOCK / (elapsed[end] - elapsed[start]), peak


def peer(model: str, tokens: Path, folder: Path, args) -> list[tuple[float, int]] | None:
    """The peer's tokens per second and peak memory in each of ``peers.torch_envs()``."""
    python = torch_python()
    if python is None:
        return None
    start, end = window(args)
    sizes = GPT if model == "gpt" else LSTM
    command = [python, str(PEER), str(tokens), "--model", model, "--iterations", str(end),
               "--warmup", str(start), "--vocab-size", str(len(CHARS)),
               "--block-size", str(BLOCK), "--batch-size", str(BATCH),
               *(f"--{key.replace('_', '-')}={value}" for key, value in sizes.items())]
    results = []
    for env in torch_envs():
        stdout, peak = run(command, env, folder)
        results.append((json.loads(stdout.splitlines()[-1])["tokens_per_s"], peak))
    return results


def products(model: str) -> list[tuple[int, int, int, int]]:
    """Every matrix product of one training iteration as ``(count, m, k, n)``: ``count`` products
    of an ``(m, k)`` by a ``(k, n)`` matrix (forward, then the gradients of both operands)."""
    n_tok, vocab = BLOCK * BATCH, len(CHARS)

    def linear(rows, i, o):  # y = x W^T, gx = gy W, gW = gy^T x
        return [(1, rows, i, o), (1, rows, o, i), (1, o, rows, i)]

    found = []
    if model == "gpt":
        c, heads = GPT["n_embd"], GPT["n_head"]
        d = c // heads
        for _ in range(GPT["n_layer"]):
            for i, o in ((c, 3 * c), (c, c), (c, 4 * c), (4 * c, c)):
                found += linear(n_tok, i, o)
            g = BATCH * heads  # q k^T, p v; then gv, gs = gy v^T, gq, gk
            found += [(g, BLOCK, d, BLOCK), (g, BLOCK, BLOCK, d), (g, BLOCK, BLOCK, d),
                      (g, BLOCK, d, BLOCK), (g, BLOCK, BLOCK, d), (g, BLOCK, BLOCK, d)]
        found += linear(n_tok, c, vocab)
    else:
        h, size = LSTM["hidden_size"], LSTM["n_embd"]
        for _ in range(LSTM["num_layers"]):
            found += linear(n_tok, size, 4 * h) + [(1, 4 * h, n_tok, h)]  # and gU
            found += [(BLOCK, BATCH, h, 4 * h), (BLOCK, BATCH, 4 * h, h)]  # each step, both ways
            size = h
        found += linear(n_tok, h, vocab)
    return found


def matmul_limit(model: str) -> tuple[float, float, float]:
    """``(tokens/s, GFLOP per iteration, GFLOP/s)`` of the model's products alone, best of 5."""
    rng = numpy.random.default_rng(0)
    operands = [(count, rng.random((m, k), dtype=numpy.float32), rng.random((k, n), dtype=numpy.float32))
                for count, m, k, n in products(model)]
    flops = sum(2 * count * a.shape[0] * a.shape[1] * b.shape[1] for count, a, b in operands)
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for count, a, b in operands:
            for _ in range(count):
                a @ b
        best = min(best, time.perf_counter() - began)
    return BATCH * BLOCK / best, flops / 1e9, flops / best / 1e9


def report(model: str, mine: tuple[float, int], theirs: list[tuple[float, int]] | None) -> None:
    rate, peak = mine
    limit, gflop, gflops = matmul_limit(model)
    print(f"  {model:7s} trainer-run {'':24s} {rate:8,.0f} tokens/s, peak {peak / 2**20:6.0f} MiB")
    if theirs is None:
        print(f"  {model:7s} PyTorch: no venv (set TORCH_PYTHON)")
    else:
        for env, (their_rate, their_peak) in zip(torch_envs(), theirs):
            print(f"  {model:7s} PyTorch, {env_label(env):27s} {their_rate:8,.0f} tokens/s, "
                  f"peak {their_peak / 2**20:6.0f} MiB")
        best_rate, best_peak = max(theirs)
        speed, memory = rate / best_rate, peak / best_peak
        print(f"  {model:7s} ratio trainer-run / PyTorch (the faster): {speed:.2f}x "
              f"(target {TARGET}x: {'met' if speed >= TARGET else 'short'}); peak memory "
              f"{memory:.2f}x (target {MEMORY_TARGET}x or less: "
              f"{'met' if memory <= MEMORY_TARGET else 'short'})")
    print(f"  {model:7s} matmul-only limit: {limit:8,.0f} tokens/s ({gflop:.2f} GFLOP of products "
          f"an iteration at {gflops:.0f} GFLOP/s, NumPy float32, default threads)")


def main():
    args = parse_args()
    start, end = window(args)
    print(f"load average before: {load()}")
    print(f"{args.chars:,} characters of {len(CHARS)} (dataset=text, tokenizer=char), block {BLOCK}, "
          f"batch {BATCH}, the char_gpt recipe, default threads; tokens/s over iterations "
          f"{start + 1}-{end}, best of {args.rounds} rounds")
    print(f"  gpt: {GPT}; lstm_lm: {LSTM}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text, tokens = make_text(folder, args.chars)
        for model in args.models.split(","):
            mine, theirs = (0.0, 0), None
            for _ in range(args.rounds):
                rate, peak = ours(model, text, folder, args)
                mine = (max(mine[0], rate), max(mine[1], peak))
                rates = peer(model, tokens, folder, args)
                theirs = rates if theirs is None or rates is None else [
                    (max(a[0], b[0]), max(a[1], b[1])) for a, b in zip(theirs, rates)]
            report(model, mine, theirs)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
