"""Training throughput of 2 ``dist_async`` workers with a server rank (3 processes; ours) against
2 ``dist_sync`` processes (the peer), on the MNIST-shaped MLP 784-1000-1000-10, Adam, the same
global batch (100 examples per update, 50 per worker) in both.

    python benchmarks/dist_throughput.py [--iterations 300] [--rounds 3]

The bound is 2 independent processes of batch 50 running at once without a kvstore: the same
forward, backward and optimizer work per 100 examples as both dist modes (``dist_sync``: each
rank applies Adam; ``dist_async``: the server applies it once per push), on the same cores,
minus the exchange; their samples/s are summed. One process of batch 100 is printed too, for
reference: with its BLAS on every core it is erratic on a loaded machine (its threads wait for
each other).

Each round runs every mode once, in turn, under ``mpiexec`` (``pip install ".[mpi]"``) for
the dist modes, with each process's BLAS limited to its share of the cores
(``OMP_NUM_THREADS``: half of them, 1 on 2 cores; without that the ranks' BLAS threads fight
over the cores, ~8x slower on 2 cores), and reads ``samples_per_s`` from each run's
``summary.json``; the medians over the rounds and the ratios are printed. On one machine the
processes share its cores, so the ratios say what splitting and exchanging costs there, not
what a second machine would gain. Target: ours >= 0.8x the peer.
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


def command(out: Path, batch: int, iterations: int, *extra) -> list:
    return [sys.executable, "-m", "trainer_run.cli", *COMMON, *extra, f"dataset.batch_size={batch}",
            f"trainer.max_iterations={iterations}", f"hydra.run.dir={out}"]


def environment(threads) -> dict:
    env = dict(os.environ)
    if threads is not None:
        env.update({v: str(threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                               "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")})
    return env


def rate(out: Path) -> float:
    return json.loads((out / "summary.json").read_text())["samples_per_s"]


def run(prefix: list, out: Path, batch: int, iterations: int, *extra, threads=None) -> float:
    subprocess.run([*prefix, *command(out, batch, iterations, *extra)], check=True,
                   capture_output=True, env=environment(threads))
    return rate(out)


def independent(out: Path, iterations: int, threads) -> float:
    """Samples/s of 2 processes of batch 50 without a kvstore, started together, summed."""
    outs = [out / str(i) for i in range(2)]
    procs = [subprocess.Popen(command(o, 50, iterations), env=environment(threads),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for o in outs]
    for p in procs:
        if p.wait():
            raise RuntimeError(p.stderr.read().decode())
    return sum(rate(o) for o in outs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    found = {"ours": [], "peer": [], "bound": [], "one": []}
    half = max(1, (os.cpu_count() or 2) // 2)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            found["ours"].append(run([mpiexec, "-n", "3"], Path(tmp) / f"async{r}", 50,
                                     args.iterations, "kvstore=dist_async", threads=half))
            found["peer"].append(run([mpiexec, "-n", "2"], Path(tmp) / f"sync{r}", 50,
                                     args.iterations, "kvstore=dist_sync", threads=half))
            found["bound"].append(independent(Path(tmp) / f"bound{r}", args.iterations, half))
            found["one"].append(run([], Path(tmp) / f"one{r}", 100, args.iterations))
    m = {k: statistics.median(v) for k, v in found.items()}
    print(f"MLP 784-1000-1000-10, Adam, global batch 100, {args.iterations} iterations, "
          f"{args.rounds} rounds (median; all rounds in brackets; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for key, label in (("ours", "ours  2 workers + server dist_async"),
                       ("peer", "peer  2 processes dist_sync"),
                       ("bound", "bound 2 processes, no exchange"),
                       ("one", "      1 process, batch 100")):
        print(f"  {label:36} {m[key]:9,.0f} samples/s {[round(x) for x in found[key]]}")
    print(f"  ratio ours / peer:  {m['ours'] / m['peer']:5.2f}x  (target >= 0.8x)")
    print(f"  ratio ours / bound: {m['ours'] / m['bound']:5.2f}x   peer / bound: "
          f"{m['peer'] / m['bound']:5.2f}x")


if __name__ == "__main__":
    main()
