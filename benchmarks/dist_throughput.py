"""Training throughput of 1 process against 2 processes (``kvstore=dist_sync``) on the MNIST-shaped
MLP 784-1000-1000-10, Adam, the same global batch (100 examples per update) in both; and of 2
``dist_async`` workers of batch 50 with a server rank (3 processes).

    python benchmarks/dist_throughput.py [--iterations 300] [--rounds 3]

Each round runs ``trainer-run`` once alone (BLAS on every core) and once under ``mpiexec -n 2``
(``pip install ".[mpi]"``) with each rank's BLAS limited to half the cores (``OMP_NUM_THREADS``;
without that the ranks' BLAS threads and MPI's busy waiting fight over the cores, ~8x slower on 2
cores), and reads ``samples_per_s`` from the run's ``summary.json``; the medians and their ratio
are printed. On one machine the two processes share its cores, so the ratio says what splitting and
exchanging costs there, not what a second machine would gain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = ["dataset=mnist_like", "dataset.size=12000", "model.hidden_sizes=[1000,1000]",
          "optimizer=adam", "trainer.progress=false", "trainer.eval_interval=100000",
          "trainer.checkpoint_interval=100000", "trainer.log_interval=100000"]


def run(prefix: list, out: Path, batch: int, iterations: int, *extra, threads=None) -> float:
    env = dict(os.environ)
    if threads is not None:
        env.update({v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                               "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")})
    subprocess.run([*prefix, sys.executable, "-m", "trainer_run.cli", *COMMON, *extra,
                    f"dataset.batch_size={batch}", f"trainer.max_iterations={iterations}",
                    f"hydra.run.dir={out}"], check=True, capture_output=True, env=env)
    return json.loads((out / "summary.json").read_text())["samples_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    one, two, ps = [], [], []
    half = max(1, (os.cpu_count() or 2) // 2)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            one.append(run([], Path(tmp) / f"one{r}", 100, args.iterations))
            two.append(run([mpiexec, "-n", "2"], Path(tmp) / f"two{r}", 50, args.iterations,
                           "kvstore=dist_sync", threads=half))
            ps.append(run([mpiexec, "-n", "3"], Path(tmp) / f"ps{r}", 50, args.iterations,
                          "kvstore=dist_async", threads=half))
    a, b, c = statistics.median(one), statistics.median(two), statistics.median(ps)
    print(f"MLP 784-1000-1000-10, Adam, global batch 100, {args.iterations} iterations, "
          f"{args.rounds} rounds (median; all rounds in brackets)")
    print(f"  1 process:              {a:9,.0f} samples/s {[round(x) for x in one]}")
    print(f"  2 processes dist_sync:  {b:9,.0f} samples/s {[round(x) for x in two]}")
    print(f"  ratio 2 / 1:            {b / a:9.2f}x")
    print(f"  2 workers + server dist_async: {c:9,.0f} samples/s {[round(x) for x in ps]} "
          f"({c / a:.2f}x of 1 process; rank 0's iterations x the global batch)")


if __name__ == "__main__":
    main()
