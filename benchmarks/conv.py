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

With ``--pooling`` it also times, the same way, forward + backward of the pooling functions on
a float32 batch of shape (100, 64, 14, 14) (the size of that convolution's output): max 2x2
stride 2, max 3x3 stride 2 pad 1, average 2x2 stride 2 (PyTorch: ``count_include_pad=True``).
Ours runs each twice: on the batch as a C-contiguous array, and on the same values laid out
``(C, H, W, N)``, as trainer-run's convolutions give them (PyTorch's is C-contiguous).

    python benchmarks/conv.py [--rounds 3] [--iterations 20] [--threads 2] [--pooling]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from peers import torch_python

N, C, O, H, K = 100, 32, 64, 14, 5  # noqa: E741 (the usual names)
PAD = (K - 1) // 2
INNER = ", x laid out (C, H, W, N) as a convolution gives it"
POOLS = {"max 2x2/2": ("max", 2, 2, 0), "max 3x3/2 pad 1": ("max", 3, 2, 1), "avg 2x2/2": ("avg", 2, 2, 0)}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pooling", action="store_true", help="also time the pooling functions")
    p.add_argument("--peer", action="store_true", help="run the PyTorch side (in the torch venv)")
    return p.parse_args()


def inputs(numpy):
    rng = numpy.random.default_rng(0)
    return (rng.standard_normal((N, C, H, H), dtype=numpy.float32),
            rng.standard_normal((O, C, K, K), dtype=numpy.float32) * 0.05,
            rng.standard_normal(O, dtype=numpy.float32))


def pool_input(numpy):
    return numpy.random.default_rng(1).standard_normal((N, O, H, H), dtype=numpy.float32)


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

    rates = {"conv": timed(step, args.iterations, args.warmup)}
    if args.pooling:
        xp_ = torch.from_numpy(pool_input(numpy)).requires_grad_()
        ops = {"max": torch.nn.functional.max_pool2d, "avg": torch.nn.functional.avg_pool2d}
        for name, (kind, k, st, pad) in POOLS.items():
            def pool_step(f=ops[kind], k=k, st=st, pad=pad):
                xp_.grad = None
                y = f(xp_, k, st, pad)
                y.backward(torch.ones_like(y))
            rates[name] = timed(pool_step, args.iterations, args.warmup)
    print(json.dumps({"peer": "pytorch", "version": torch.__version__, "threads": args.threads,
                      "samples_per_s": rates}))


def trainer_run_samples_per_s(args) -> dict:
    """Samples/s by case: ``conv``, and the pooling cases with ``--pooling``."""
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

    rates = {"conv": timed(step, args.iterations, args.warmup)}
    if args.pooling:
        from trainer_run.functions.pooling import average_pooling_2d, max_pooling_2d

        plain = pool_input(numpy)
        inner = numpy.ascontiguousarray(plain.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
        ops = {"max": max_pooling_2d, "avg": average_pooling_2d}
        for name, (kind, k, st, pad) in POOLS.items():
            for suffix, data in (("", plain), (INNER, inner)):
                x = Parameter(data)

                def pool_step(f=ops[kind], k=k, st=st, pad=pad, x=x):
                    x.cleargrad()
                    y = f(x, k, st, pad)
                    backward(y, gy=numpy.ones(y.shape, numpy.float32))
                rates[name + suffix] = timed(pool_step, args.iterations, args.warmup)
    return rates


def torch_samples_per_s(args) -> dict | None:
    """The PyTorch peer's JSON line, or None without a torch venv."""
    python = torch_python()
    if python is None:
        return None
    cmd = [python, __file__, "--peer", "--iterations", str(args.iterations), "--warmup",
           str(args.warmup), "--threads", str(args.threads)] + (["--pooling"] if args.pooling else [])
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
    print(f"forward+backward, float32, {args.threads} threads, best of {args.rounds} rounds x "
          f"{args.iterations} iterations; samples/s (all rounds in brackets)")
    for case in ours[0]:
        mine = [r[case] for r in ours]
        label = f"conv 5x5 pad 2, {C}->{O}, x ({N}, {C}, {H}, {H})" if case == "conv" else f"pool {case}"
        print(f"  {label}")
        print(f"    trainer-run        {max(mine):9,.0f}  {[round(v) for v in mine]}")
        if theirs:
            peers = [r[case.removesuffix(INNER)] for r in theirs]
            print(f"    pytorch {peer['version']:10s} {max(peers):9,.0f}  {[round(v) for v in peers]}")
            print(f"    ratio trainer-run / pytorch: {max(mine) / max(peers):.3f}")
        else:
            print("    pytorch: skipped (no torch venv)")
    best, conv = max(limits), max(r["conv"] for r in ours)
    print(f"  conv matmul-only limit {best[0]:9,.0f} samples/s ({best[1]:.1f} GFLOP/s NumPy matmul, "
          f"im2col shapes); trainer-run conv at {conv / best[0]:.2f} of it")


if __name__ == "__main__":
    sys.exit(main())
