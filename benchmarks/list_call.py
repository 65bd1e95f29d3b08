"""The MXNet-style list call against PyTorch's fused Adam, on separate arrays.

``get_updater(create("adam"))(indices, grads, weights)`` on ``--tensors`` separate float32
arrays of ``--size`` elements (not one flat buffer), against ``torch.optim.Adam(params,
fused=True)`` on the same sizes, run from its own venv (``$TORCH_PYTHON`` or
``/work/torch-venv/bin/python``) in the same run, with OpenMP's default waits and with
passive ones (as ours wait), the faster counting. Prints milliseconds per step (median of
``--rounds`` rounds of ``--steps`` steps), the ratio (PyTorch time / ours: above 1 is faster
than PyTorch) and the memory-bandwidth bound of an Adam step on these arrays (28 bytes per
parameter, :func:`optimizers.bandwidth`).

    python benchmarks/list_call.py [--tensors 100] [--size 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from optimizers import bandwidth  # noqa: E402
from peers import torch_envs, torch_python  # noqa: E402

from trainer_run import optimizers  # noqa: E402

TARGET = 0.9
ADAM_BYTES = 28
"""Adam reads weight, gradient, mean and variance and writes weight, mean and variance."""

PEER = """
import statistics, sys, time, torch
tensors, size, steps, rounds = map(int, sys.argv[1:])
torch.manual_seed(0)
params = [torch.nn.Parameter(torch.randn(size)) for _ in range(tensors)]
for p in params:
    p.grad = torch.randn(size)
opt = torch.optim.Adam(params, lr=0.001, fused=True)
opt.step()
times = []
for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(steps):
        opt.step()
    times.append((time.perf_counter() - start) / steps)
print(statistics.median(times))
"""


def ours(tensors: int, size: int, steps: int) -> float:
    """Seconds per list call (one round of ``steps`` calls after a warm-up call)."""
    rng = numpy.random.default_rng(0)
    weights = [rng.standard_normal(size, dtype=numpy.float32) for _ in range(tensors)]
    grads = [rng.standard_normal(size, dtype=numpy.float32) for _ in range(tensors)]
    indices = list(range(tensors))
    updater = optimizers.get_updater(optimizers.create("adam"))
    updater(indices, grads, weights)
    start = time.perf_counter()
    for _ in range(steps):
        updater(indices, grads, weights)
    return (time.perf_counter() - start) / steps


def peer(tensors: int, size: int, steps: int, rounds: int) -> float | None:
    """PyTorch's seconds per fused Adam step (median of ``rounds``), None without PyTorch."""
    python = torch_python()
    if python is None:
        return None
    return min(float(subprocess.run([python, "-c", PEER, str(tensors), str(size), str(steps),
                                     str(rounds)], capture_output=True, text=True, check=True,
                                    env=env).stdout.split()[-1]) for env in torch_envs())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=100)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ours(args.tensors, args.size, 1)                      # compiles (or loads) the kernel
    mine, theirs = [], []
    for _ in range(args.rounds):                          # interleaved: same machine load
        mine.append(ours(args.tensors, args.size, args.steps))
        t = peer(args.tensors, args.size, args.steps, 1)
        if t is not None:
            theirs.append(t)
    total = args.tensors * args.size
    bound = total * ADAM_BYTES / bandwidth(total * 4)
    ms = statistics.median(mine) * 1e3
    print(f"Adam list call on {args.tensors} separate float32 arrays of {args.size:,}; ms per "
          f"step, median of {args.rounds} rounds")
    print(f"ours (get_updater list call)  {ms:8.2f}")
    print(f"bandwidth bound ({ADAM_BYTES} B/param)  {bound * 1e3:8.2f}   ours reach "
          f"{bound * 1e3 / ms:.2f}x of it")
    if theirs:
        torch_ms = statistics.median(theirs) * 1e3
        print(f"PyTorch fused Adam            {torch_ms:8.2f}")
        print(f"ratio (PyTorch / ours)        {torch_ms / ms:8.2f}   target >= {TARGET}")
    else:
        print("PyTorch: not found (set TORCH_PYTHON)")


if __name__ == "__main__":
    main()
