"""Training throughput of 2 ``dist_async`` workers with a server rank (3 processes; ours) against
2 ``dist_sync`` processes (the peer) and 1 process (the bound), on the MNIST-shaped MLP
784-1000-1000-10, Adam, the same global batch (100 examples per update, 50 per worker) in all.

    python benchmarks/dist_throughput.py [--iterations 300] [--rounds 3]

Each round runs ``trainer-run`` once alone (BLAS on every core) and once under ``mpiexec -n 2``
(``pip install ".[mpi]"``) with each rank's BLAS limited to half the cores (``OMP_NUM_THREADS``;
without that the ranks' BLAS threads and MPI's busy waiting fight over the cores, ~8x slower on 2
cores), and reads ``samples_per_s`` from the run's ``summary.json``; the medians and their ratio
are printed, the three modes taking turns in each round. On one machine the processes share its
cores, so the ratios say what splitting and exchanging costs there, not what a second machine would
gain. The bound is the 1-process rate: every mode does the same forward, backward and optimizer
work on the same cores, and the split ones add the exchange (and ``dist_async`` a third process).
Target: ours >= 0.8x the peer.
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
    one, sync, ours = [], [], []
    half = max(1, (os.cpu_count() or 2) // 2)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            one.append(run([], Path(tmp) / f"one{r}", 100, args.iterations))
            sync.append(run([mpiexec, "-n", "2"], Path(tmp) / f"sync{r}", 50, args.iterations,
                            "kvstore=dist_sync", threads=half))
            ours.append(run([mpiexec, "-n", "3"], Path(tmp) / f"async{r}", 50, args.iterations,
                            "kvstore=dist_async", threads=half))
    a, b, c = statistics.median(one), statistics.median(sync), statistics.median(ours)
    print(f"MLP 784-1000-1000-10, Adam, global batch 100, {args.iterations} iterations, "
          f"{args.rounds} rounds (median; all rounds in brackets; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"  ours  2 workers + server dist_async: {c:9,.0f} samples/s {[round(x) for x in ours]}")
    print(f"  peer  2 processes dist_sync:         {b:9,.0f} samples/s {[round(x) for x in sync]}")
    print(f"  bound 1 process:                     {a:9,.0f} samples/s {[round(x) for x in one]}")
    print(f"  ratio ours / peer:  {c / b:5.2f}x  (target >= 0.8x)")
    print(f"  ratio ours / bound: {c / a:5.2f}x   peer / bound: {b / a:5.2f}x")


if __name__ == "__main__":
    main()
