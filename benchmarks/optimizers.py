"""Optimizer step throughput: every registered optimizer, per tensor vs fused, vs PyTorch.

10M float32 parameters in 100 tensors with fixed random gradients. For each optimizer:

- per tensor: ``update`` one tensor at a time (MXNet's per-index updater, one call per tensor:
  the fused step on that tensor alone);
- fused: one step of the flat parameter groups (``IndexApplier.step``), compiled with numba
  when installed (``pip install trainer-run[fast]``), else the chunked NumPy path;
- PyTorch 2.13 CPU on the same sizes where it has the optimizer (fused implementation where
  it has one), run from its own venv (``$TORCH_PYTHON`` or ``/work/torch-venv/bin/python``);
- the memory-bandwidth bound: measured bandwidth / bytes moved per parameter (weight, gradient
  and each weight-shaped state read, weight and states written, 4 bytes each: the least
  traffic of a step, LAMB's and LARS's norms included, since their second pass over a
  parameter reads it from cache), and ``fused/bound``, the fraction of it the fused step
  reaches (target: at least 0.8). The fused rate and the bound are measured side by side in
  ``--rounds`` rounds, medians printed;
- for SGLD, its peer: NumPy's fastest normal fill (``standard_normal(out=buf)``, float32,
  with PCG64, SFC64 and Philox) and the fill of SGLD's own stream (float64 from PCG64).

    python benchmarks/optimizers.py [--params 10000000] [--tensors 100] [--names adam sgd]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy
from peers import torch_envs, torch_python

from trainer_run import jit, optimizers
from trainer_run.jit import prange
from trainer_run.params import Parameter, ParamStore
from trainer_run.storage.states import state_leaves

HERE = Path(__file__).resolve().parent
SETTINGS = {"sgd": {"momentum": 0.9}, "nag": {"momentum": 0.9}, "lars": {"momentum": 0.9},
            "rmsprop": {"centered": False}}
TARGET = 0.8
"""The fraction of its bandwidth bound every fused optimizer should reach (issue 17)."""
PEER_NAMES = {"sgd": "sgd", "adam": "adam", "adamw": "adamw", "adagrad": "adagrad",
              "rmsprop": "rmsprop", "adadelta": "adadelta", "adamax": "adamax", "nadam": "nadam"}


def _params(total: int, tensors: int, rng) -> list[numpy.ndarray]:
    size = total // tensors
    return [rng.standard_normal(size, dtype=numpy.float32) for _ in range(tensors)]


def _rate(step, count: int, repeats: int) -> float:
    step()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return count * repeats / (time.perf_counter() - start)


def measure(name: str, total: int, tensors: int, repeats: int, rounds: int) -> dict:
    """Reference and fused rates (parameters/s) of optimizer ``name``; the fused step is
    timed in ``rounds`` rounds, each beside a bandwidth measurement, and the fused rate,
    bound and fraction of it reached are the medians over the rounds. Within a round the
    fused rate is the best of ``repeats`` steps, as the bandwidth is the best of 5 runs."""
    rng = numpy.random.default_rng(0)
    weights, grads = _params(total, tensors, rng), _params(total, tensors, rng)
    count = sum(w.size for w in weights)
    kwargs = SETTINGS.get(name, {})

    def make():
        opt = optimizers.create(name, **kwargs)
        opt.rng = numpy.random.default_rng(0)
        return opt

    per_tensor = optimizers.get_updater(make())
    ref_weights = [w.copy() for w in weights]

    def per_tensor_step():
        for i, (w, g) in enumerate(zip(ref_weights, grads)):
            per_tensor(i, g, w)

    store = ParamStore({f"p{i}": Parameter(w.copy()) for i, w in enumerate(weights)})
    for p, g in zip(store, grads):
        p.grad[...] = g
    fused = optimizers.get_updater(make())
    fused.attach(store)
    opt = fused.optimizer
    fusable = opt.flat_state and opt.fused_step is not None
    state_arrays = sum(1 for a in state_leaves(fused.states[0]) if a.shape == weights[0].shape)
    moved = 4 * (3 + 2 * state_arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_rate = _rate(per_tensor_step, count, max(1, repeats // 2))
        fused.step()
        samples = []
        for _ in range(rounds):
            bound = bandwidth(total * 4) / moved
            rate = max(_rate(fused.step, count, 1) for _ in range(repeats))
            samples.append((rate, bound, rate / bound))
    return {"name": name, "per_tensor": ref_rate, "path": "fused" if fusable else "per-index",
            "bytes": moved, **dict(zip(("fused", "bound", "of_bound"),
                                       map(statistics.median, zip(*samples))))}


def bandwidth(total: int) -> float:
    """Bytes/s of an in-place stream ``a += s * b`` (read a and b, write a: the access
    pattern of an optimizer step) over arrays far larger than the caches; best of 5."""
    a = numpy.ones(total, numpy.float32)
    b = numpy.ones(total, numpy.float32)
    loop = jit.kernel(_axpy)
    if jit.usable(loop, a, b):
        def run():
            loop(a, b, numpy.float32(0.5))
    else:
        def run():
            a.__iadd__(b * numpy.float32(0.5))
    return 3 * 4 * max(_rate(run, total, 1) for _ in range(5))


def _axpy(a, b, s):
    for i in prange(a.size):
        a[i] = a[i] + s * b[i]


def torch_rates(names: list[str], total: int, tensors: int) -> dict:
    python = torch_python()
    wanted = sorted({PEER_NAMES[n] for n in names if n in PEER_NAMES})
    if python is None or not wanted:
        return {}
    best: dict = {}
    for env in torch_envs():
        result = subprocess.run([python, str(HERE / "torch_optim_peer.py"), "--params", str(total),
                                 "--tensors", str(tensors), "--names", *wanted],
                                capture_output=True, text=True, check=True, env=env)
        for line in result.stdout.splitlines():
            row = json.loads(line) if line.startswith("{") else None
            if row and row["params_per_s"] > best.get(row["optimizer"], {}).get("params_per_s", 0):
                best[row["optimizer"]] = row
    return best


def noise_fill(total: int, repeats: int) -> list[tuple[str, float]]:
    """Normal draws per second of NumPy's ``standard_normal(out=...)`` into a buffer of
    ``total``: float32 with each bit generator (PCG64, SFC64, Philox), and SGLD's own stream
    (float64 from PCG64, ``numpy.random.default_rng``); best of ``repeats``."""
    rates = []
    for bits in (numpy.random.PCG64, numpy.random.SFC64, numpy.random.Philox):
        gen, buf = numpy.random.Generator(bits(0)), numpy.empty(total, numpy.float32)
        rates.append((f"{bits.__name__} float32", max(
            _rate(lambda: gen.standard_normal(out=buf, dtype=numpy.float32), total, 1)
            for _ in range(repeats))))
    gen, buf = numpy.random.default_rng(0), numpy.empty(total, numpy.float64)
    rates.append(("PCG64 float64 (SGLD's stream)",
                  max(_rate(lambda: gen.standard_normal(out=buf), total, 1) for _ in range(repeats))))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=10_000_000)
    parser.add_argument("--tensors", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--names", nargs="+", default=sorted(optimizers.REGISTRY))
    args = parser.parse_args()
    peer = torch_rates(args.names, args.params, args.tensors)
    adam_peer = peer.get("adam", {}).get("params_per_s")
    print(f"{args.params:,} float32 parameters in {args.tensors} tensors; M params/s, higher is "
          f"better; bound = in-place stream bandwidth / bytes moved per parameter, measured "
          f"beside each of {args.rounds} rounds (medians)")
    header = (f"{'optimizer':<13}{'per tensor':>11}{'fused':>9} {'path':<10}{'PyTorch':>9} "
              f"{'impl':<8}{'vs torch':>9}{'vs torch adam':>14}{'bytes':>6}{'bound':>8}"
              f"{'fused/bound':>12}")
    print(header)
    missed = []
    for name in args.names:
        row = measure(name, args.params, args.tensors, args.repeats, args.rounds)
        torch_row = peer.get(PEER_NAMES.get(name, ""), {})
        t = torch_row.get("params_per_s")
        print(f"{name:<13}{row['per_tensor'] / 1e6:>11.0f}{row['fused'] / 1e6:>9.0f} {row['path']:<10}"
              f"{(t or 0) / 1e6:>9.0f} {torch_row.get('impl', '-'):<8}"
              f"{(row['fused'] / t if t else float('nan')):>9.2f}"
              f"{(row['fused'] / adam_peer if adam_peer else float('nan')):>14.2f}"
              f"{row['bytes']:>6}{row['bound'] / 1e6:>8.0f}{row['of_bound']:>12.2f}")
        if row["path"] == "fused" and row["of_bound"] < TARGET:
            missed.append(name)
        if name == "sgld":
            sgld = row["fused"]
        sys.stdout.flush()
    print(f"target: every fused optimizer at fused/bound >= {TARGET}; below it: "
          f"{', '.join(missed) or 'none'}")
    if "sgld" in args.names:
        fills = noise_fill(args.params, args.rounds)
        best = max(fills[:-1], key=lambda f: f[1])
        print("SGLD's peer, NumPy's normal fill (M draws/s): " +
              ", ".join(f"{n} {r / 1e6:.0f}" for n, r in fills))
        print(f"SGLD fused {sgld / 1e6:.0f} M params/s = {sgld / best[1]:.2f}x the fastest fill "
              f"({best[0]}), {sgld / fills[-1][1]:.2f}x its own stream's fill")


if __name__ == "__main__":
    main()
