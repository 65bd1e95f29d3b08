"""End-to-end training throughput: trainer-run against PyTorch CPU eager, same shapes.

MLP 784-1000-1000-10 (ReLU), batch 100, Adam (lr 0.001), synthetic MNIST-shaped data.
Each timed iteration is a full training step: batch, forward, loss, backward, optimizer.
The two are run alternately ``--rounds`` times in the same session (the machine is shared
and noisy) and the median of each is reported, with their ratio and the limit set by the
matrix multiplies alone (measured here with NumPy on the same shapes).

PyTorch runs in its own virtual environment, never as a dependency of this project: the
script uses ``$TORCH_PYTHON``, else ``/work/torchvenv/bin/python``, else skips it.

    python benchmarks/e2e_mlp.py [--rounds 3] [--iterations 200] [--optimizer adam|sgd]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy

from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import ArrayDataset, SerialIterator, mnist_like
from trainer_run.models import MLP
from trainer_run.updaters import StandardUpdater

SIZES = (784, 1000, 1000, 10)
HERE = Path(__file__).resolve().parent
OPTIMIZERS = {"adam": ("adam", {"learning_rate": 0.001}),
              "sgd": ("sgd", {"learning_rate": 0.1, "momentum": 0.9})}


def trainer_run_samples_per_s(batch: int, iterations: int, warmup: int, optimizer: str) -> float:
    backend = get_backend("numpy", seed=0)
    x, t = mnist_like(10_000, numpy.random.default_rng(0))
    model = MLP(SIZES[0], SIZES[-1], backend, hidden_sizes=list(SIZES[1:-1]))
    name, kwargs = OPTIMIZERS[optimizer]
    iterator = SerialIterator(ArrayDataset(x, t), batch, rng=numpy.random.default_rng(1))
    updater = StandardUpdater(iterator, optimizers.create(name, **kwargs), model, backend=backend)
    for _ in range(warmup):
        updater.update()
    start = time.perf_counter()
    for _ in range(iterations):
        updater.update()
    return iterations * batch / (time.perf_counter() - start)


def torch_samples_per_s(batch: int, iterations: int, warmup: int, optimizer: str) -> float | None:
    python = os.environ.get("TORCH_PYTHON", "/work/torchvenv/bin/python")
    if not Path(python).exists():
        return None
    args = [python, str(HERE / "torch_peer.py"), "--batch-size", str(batch), "--iterations",
            str(iterations), "--warmup", str(warmup), "--optimizer", optimizer,
            "--sizes", ",".join(map(str, SIZES))]
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["samples_per_s"]


def matmul_limit_samples_per_s(batch: int, repeats: int = 100) -> tuple[float, float]:
    """(samples/s, GFLOP/s) if an iteration were only its matrix multiplies."""
    rng = numpy.random.default_rng(0)
    ops = []
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        x = rng.random((batch, n_in), dtype=numpy.float32)
        w = rng.random((n_out, n_in), dtype=numpy.float32)
        gy = rng.random((batch, n_out), dtype=numpy.float32)
        ops.append((x, w.T, numpy.empty((batch, n_out), numpy.float32)))
        ops.append((gy.T, x, numpy.empty((n_out, n_in), numpy.float32)))
        if i > 0:
            ops.append((gy, w, numpy.empty((batch, n_in), numpy.float32)))
    flops = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b, _ in ops)
    for a, b, o in ops * 10:
        numpy.matmul(a, b, out=o)
    start = time.perf_counter()
    for _ in range(repeats):
        for a, b, o in ops:
            numpy.matmul(a, b, out=o)
    seconds = (time.perf_counter() - start) / repeats
    return batch / seconds, flops / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
    args = parser.parse_args()
    ours, peer, limit = [], [], []
    for _ in range(args.rounds):
        ours.append(trainer_run_samples_per_s(args.batch_size, args.iterations, args.warmup,
                                              args.optimizer))
        result = torch_samples_per_s(args.batch_size, args.iterations, args.warmup, args.optimizer)
        if result is not None:
            peer.append(result)
        limit.append(matmul_limit_samples_per_s(args.batch_size))
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {args.batch_size}, {args.optimizer}, "
          f"{args.rounds} rounds of {args.iterations} iterations (median; all rounds in brackets)")
    print(f"  trainer-run (numpy {numpy.__version__}): {statistics.median(ours):9,.0f} samples/s "
          f"{[round(v) for v in ours]}")
    if peer:
        print(f"  PyTorch CPU eager:              {statistics.median(peer):9,.0f} samples/s "
              f"{[round(v) for v in peer]}")
        print(f"  ratio trainer-run / PyTorch:    {statistics.median(ours) / statistics.median(peer):9.2f}x")
    else:
        print("  PyTorch: skipped (no torch venv; set TORCH_PYTHON to a python with torch 2.13)")
    best = max(limit)
    print(f"  matmul-only limit:              {best[0]:9,.0f} samples/s ({best[1]:.0f} GFLOP/s)")
    print(f"  trainer-run / matmul limit:     {statistics.median(ours) / best[0]:9.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
