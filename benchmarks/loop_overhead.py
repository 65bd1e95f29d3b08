"""Loop overhead: a tiny MLP where the framework, not the arithmetic, sets the pace.

MLP 2-16-2 (ReLU), batch 32, SGD (lr 0.1, momentum 0.9), microseconds per iteration:

- ours: ``trainer-run`` on the spirals with logging (a row every 50 iterations to
  ``metrics.jsonl`` and ``metrics.csv``) and progress (its plain line per row, stdout being a
  pipe) on, evaluation and the checkpoint at the end only; the time per iteration is read
  from ``metrics.jsonl``'s ``elapsed_s`` between its second and its second-to-last rows
  (steady state: the logging and progress of those rows included, the start and the final
  evaluation, checkpoint and table not);
- the peer: PyTorch 2.13 CPU's raw loop (``benchmarks/torch_peer.py``: zero_grad, forward,
  cross-entropy, backward, step; no logging, no progress), from its own venv
  (``$TORCH_PYTHON``, else ``/work/torch-venv/bin/python``), the faster of its default thread
  count and one thread (tiny operations gain nothing from threads, and lose much when the
  machine is shared);
- the floor: the same step written directly in NumPy (index the batch, two matmuls, ReLU,
  softmax cross-entropy, their gradients, the momentum update), what any NumPy framework's
  iteration costs at least.

Rounds alternate (the machine may be shared); medians are printed with the ratio of the
peer's time to ours (target: at least 2). ``--baseline PYTHON`` adds the same run of another
installation of trainer-run (an older commit's virtual environment), in the same rounds, with
its time over ours. ``--profile`` adds one ``trainer.profile=true`` run's table of where an
iteration's time goes.

    python benchmarks/loop_overhead.py [--rounds 3] [--iterations 4000] [--baseline PYTHON] [--profile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
from peers import torch_python

HERE = Path(__file__).resolve().parent
BATCH = 32
OURS = ["model.hidden_sizes=[16]", "optimizer=sgd", "optimizer.learning_rate=0.1",
        "optimizer.momentum=0.9", f"dataset.batch_size={BATCH}", "trainer.progress=true"]


def ours(folder: Path, iterations: int, *extra: str, python: str = sys.executable) -> tuple[float, Path]:
    """Microseconds per iteration of one run (of ``python``'s trainer-run), and its directory."""
    out = Path(tempfile.mkdtemp(dir=folder))
    subprocess.run([python, "-m", "trainer_run.cli", *OURS,
                    f"trainer.max_iterations={iterations}", f"trainer.eval_interval={iterations}",
                    f"trainer.checkpoint_interval={iterations}", f"hydra.run.dir={out}", *extra],
                   check=True, capture_output=True)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    first, last = rows[1], rows[-2]
    return ((last["elapsed_s"] - first["elapsed_s"]) / (last["iteration"] - first["iteration"])
            * 1e6, out)


def peer(iterations: int) -> float | None:
    """PyTorch's microseconds per iteration: the faster of its default threads and one."""
    python = torch_python()
    if python is None:
        return None
    times = []
    for threads in ([], ["--threads", "1"]):
        result = subprocess.run([python, str(HERE / "torch_peer.py"), "--sizes", "2,16,2",
                                 "--batch-size", str(BATCH), "--optimizer", "sgd", *threads,
                                 "--iterations", str(iterations), "--warmup", "200"],
                                capture_output=True, text=True, check=True)
        times.append(BATCH / json.loads(result.stdout.splitlines()[-1])["samples_per_s"] * 1e6)
    return min(times)


def floor(iterations: int) -> float:
    """Microseconds per iteration of the step in plain NumPy (float32, as ours)."""
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((2000, 2), dtype=numpy.float32)
    t = rng.integers(0, 2, 2000)
    w1, b1 = rng.standard_normal((16, 2), dtype=numpy.float32) * 0.5, numpy.zeros(16, numpy.float32)
    w2, b2 = rng.standard_normal((2, 16), dtype=numpy.float32) * 0.5, numpy.zeros(2, numpy.float32)
    params = [w1, b1, w2, b2]
    moms = [numpy.zeros_like(p) for p in params]
    lr, mu = numpy.float32(0.1), numpy.float32(0.9)

    def step(idx):
        xb, tb = x[idx], t[idx]
        h = xb @ w1.T + b1
        a = numpy.maximum(h, 0)
        y = a @ w2.T + b2
        y = y - y.max(axis=1, keepdims=True)
        e = numpy.exp(y)
        p = e / e.sum(axis=1, keepdims=True)
        p[numpy.arange(len(tb)), tb] -= 1
        gy = p / numpy.float32(len(tb))
        grads = [None, None, gy.T @ a, gy.sum(axis=0)]
        ga = gy @ w2
        ga[h <= 0] = 0
        grads[0], grads[1] = ga.T @ xb, ga.sum(axis=0)
        for w, m, g in zip(params, moms, grads):
            m *= mu
            m -= lr * g
            w += m

    order = rng.permutation(2000)
    batches = [order[i:i + BATCH] for i in range(0, 2000 - BATCH + 1, BATCH)]
    for i in range(200):
        step(batches[i % len(batches)])
    start = time.perf_counter()
    for i in range(iterations):
        step(batches[i % len(batches)])
    return (time.perf_counter() - start) / iterations * 1e6


def profile_table(folder: Path, iterations: int) -> None:
    _, out = ours(folder, iterations, "trainer.profile=true")
    report = json.loads((out / "profile.json").read_text())
    print(f"\nwhere one iteration's time goes (trainer.profile=true, {iterations} iterations)")
    for name, stage in report["stages"].items():
        per = stage.get("per_iteration_ms")
        if per is not None:
            print(f"  {name:<16}{per * 1000:>9.1f} us {stage['percent']:>6.1f}%")
    for name, seconds in report.get("extensions", {}).items():
        print(f"    {name:<14}{seconds / iterations * 1e6:>9.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="the interpreter of another trainer-run installation to time too")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"ours": [], "peer": [], "floor": [], "baseline": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            rows["ours"].append(ours(Path(folder), args.iterations)[0])
            if args.baseline:
                rows["baseline"].append(ours(Path(folder), args.iterations, python=args.baseline)[0])
            theirs = peer(args.iterations)
            if theirs is not None:
                rows["peer"].append(theirs)
            rows["floor"].append(floor(args.iterations))
        med = {k: statistics.median(v) if v else float("nan") for k, v in rows.items()}
        print(f"MLP 2-16-2, batch {BATCH}, SGD; medians of {args.rounds} rounds, us per iteration")
        print(f"  ours (logging + progress)     {med['ours']:>8.1f}")
        print(f"  PyTorch 2.13 raw loop         {med['peer']:>8.1f}   "
              f"peer/ours {med['peer'] / med['ours']:.2f}x (target >= 2)")
        print(f"  floor: the step in NumPy      {med['floor']:>8.1f}   "
              f"floor/ours {med['floor'] / med['ours']:.2f}x")
        if args.baseline:
            print(f"  baseline ({args.baseline})\n"
                  f"    the same run                {med['baseline']:>8.1f}   "
                  f"baseline/ours {med['baseline'] / med['ours']:.2f}x (target >= 1)")
        if args.profile:
            profile_table(Path(folder), args.iterations)


if __name__ == "__main__":
    main()
