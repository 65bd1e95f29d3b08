"""Convolution forward + backward: trainer-run's ``convolution_2d`` against PyTorch CPU eager.

A 5x5 'same' convolution (pad 2), 32 -> 64 channels with bias, on a float32 batch of shape
(100, 32, 14, 14); each timed iteration is the forward pass and the backward pass to ``x``,
``W`` and ``b`` (``gy`` all ones). The two are run alternately ``--rounds`` times (the machine
is shared and noisy) and the best of each is reported, with their ratio and the limit set by
the three matrix multiplies of the im2col formulation alone (forward, ``gW``, ``gcol``), timed
here with NumPy on the same shapes.

PyTorch runs in its own virtual environment (``$TORCH_PYTHON``, else
``/work/torch-venv/bin/python``; skipped when absent): this file re-runs itself there with
``--peer``, which imports torch only. Both sides use ``--threads`` threads.

    python benchmarks/conv.py [--rounds 3] [--iterations 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

N, C, O, H, K = 100, 32, 64, 14, 5  # noqa: E741 (the usual names)
PAD = (K - 1) // 2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peer", action="store_true", help="run the PyTorch side (in the torch venv)")
    return p.parse_args()


def inputs(numpy):
    rng = numpy.random.default_rng(0)
    return (rng.standard_normal((N, C, H, H), dtype=numpy.float32),
            rng.standard_normal((O, C, K, K), dtype=numpy.float32) * 0.05,
            rng.standard_normal(O, dtype=numpy.float32))


def timed(step, iterations, warmup) -> float:
    """Samples/s of ``step`` (one batch of N)."""
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    return iterations * N / (time.perf_counter() - start)


def torch_peer(args) -> None:
    import numpy
    import torch

    torch.set_num_threads(args.threads)
    x, W, b = (torch.from_numpy(a).requires_grad_() for a in inputs(numpy))

    def step():
        x.grad = W.grad = b.grad = None
        y = torch.nn.functional.conv2d(x, W, b, padding=PAD)
        y.backward(torch.ones_like(y))

    rate = timed(step, args.iterations, args.warmup)
    print(json.dumps({"peer": "pytorch", "version": torch.__version__, "threads": args.threads,
                      "samples_per_s": rate}))


def trainer_run_samples_per_s(args) -> float:
    import numpy

    from trainer_run.autograd import backward
    from trainer_run.functions.convolution import convolution_2d
    from trainer_run.params import Parameter

    params = [Parameter(a) for a in inputs(numpy)]
    gy = numpy.ones((N, O, H, H), numpy.float32)

    def step():
        for p in params:
            p.cleargrad()
        backward(convolution_2d(*params, pad=PAD), gy=gy)

    return timed(step, args.iterations, args.warmup)


def torch_samples_per_s(args) -> dict | None:
    python = os.environ.get("TORCH_PYTHON", "/work/torch-venv/bin/python")
    if not Path(python).exists():
        return None
    cmd = [python, __file__, "--peer", "--iterations", str(args.iterations), "--warmup",
           str(args.warmup), "--threads", str(args.threads)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def matmul_limit(repeats: int = 10) -> tuple[float, float]:
    """(samples/s, GFLOP/s) if an iteration were only its three im2col matrix multiplies."""
    import numpy

    rng = numpy.random.default_rng(0)
    kk, npix = C * K * K, N * H * H
    w, col, gy = (rng.standard_normal(s, dtype=numpy.float32) for s in ((O, kk), (kk, npix), (O, npix)))
    products = [lambda: w @ col, lambda: gy @ col.T, lambda: w.T @ gy]
    for f in products:
        f()
    start = time.perf_counter()
    for _ in range(repeats):
        for f in products:
            f()
    seconds = (time.perf_counter() - start) / repeats
    return N / seconds, 3 * 2 * O * kk * npix / seconds / 1e9


def main() -> None:
    args = parse_args()
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)  # before NumPy is imported; inherited by the peer
    if args.peer:
        return torch_peer(args)
    ours, theirs, limits = [], [], []
    for _ in range(args.rounds):
        ours.append(trainer_run_samples_per_s(args))
        peer = torch_samples_per_s(args)
        if peer is not None:
            theirs.append(peer["samples_per_s"])
        limits.append(matmul_limit())
    print(f"conv2d 5x5 pad 2, {C}->{O}, x ({N}, {C}, {H}, {H}) float32, forward+backward, "
          f"{args.threads} threads, best of {args.rounds} rounds x {args.iterations} iterations")
    print(f"  trainer-run      {max(ours):9,.0f} samples/s  {[round(v) for v in ours]}")
    if theirs:
        print(f"  pytorch {peer['version']:8s} {max(theirs):9,.0f} samples/s  {[round(v) for v in theirs]}")
        print(f"  ratio trainer-run / pytorch: {max(ours) / max(theirs):.3f}")
    else:
        print("  pytorch: skipped (no torch venv)")
    best = max(limits)
    print(f"  matmul-only limit {best[0]:9,.0f} samples/s ({best[1]:.1f} GFLOP/s NumPy matmul, "
          f"im2col shapes); trainer-run at {max(ours) / best[0]:.2f} of it")


if __name__ == "__main__":
    sys.exit(main())
