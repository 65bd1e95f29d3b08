"""What checkpoints cost the loop, and how fast one is written.

- Stall: ``trainer-run`` on an MLP 784-1000-1000-10 with Adam (``dataset=mnist_like``, batch
  100; its checkpoints hold about 21 MB), ``--iterations`` iterations with a checkpoint every
  20 and with none but the last, alternating ``--rounds`` times (the machine may be shared).
  Each run's speed is ``summary.json``'s ``samples_per_s`` (training time alone). Target: with
  checkpoints at least 0.95x without.
- Write: :func:`trainer_run.checkpoint.save` of that state's arrays against ``numpy.savez`` of
  the same arrays to one file followed by ``fsync`` (the physical floor of the format: the
  bytes once, durably). Target: at least 0.8x.

    python benchmarks/checkpoint_stall.py [--rounds 3] [--iterations 400] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy

from trainer_run import checkpoint

ARGS = ("dataset=mnist_like", "dataset.size=4000", "model.hidden_sizes=[1000,1000]",
        "dataset.batch_size=100", "optimizer=adam", "trainer.progress=false",
        "trainer.eval_interval=100000", "trainer.log_interval=100000", "logger=[]")


def speed(folder: Path, iterations: int, every: int, threads: int | None = None) -> float:
    out = Path(tempfile.mkdtemp(dir=folder))
    env = dict(os.environ)
    if threads:
        env.update({k: str(threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                              "MKL_NUM_THREADS")})
    subprocess.run([sys.executable, "-m", "trainer_run.cli", *ARGS,
                    f"trainer.max_iterations={iterations}", f"trainer.checkpoint_interval={every}",
                    f"hydra.run.dir={out}"], check=True, capture_output=True, env=env)
    return json.loads((out / "summary.json").read_text())["samples_per_s"]


def state_arrays(folder: Path) -> dict:
    """The arrays of a checkpoint of the benchmarked run (parameters, Adam's moments, ...)."""
    out = folder / "state"
    subprocess.run([sys.executable, "-m", "trainer_run.cli", *ARGS, "trainer.max_iterations=2",
                    f"hydra.run.dir={out}"], check=True, capture_output=True)
    with numpy.load(checkpoint.find(out) / checkpoint.ARRAYS) as data:
        return {k: data[k] for k in data.files}


def savez_synced(arrays: dict, path: Path) -> None:
    with open(path, "wb") as f:
        numpy.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())


def best_seconds(action, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--threads", type=int, default=None,
                        help="BLAS threads of the training runs (1 leaves a core of a 2-core "
                             "machine to the checkpoint writer); default: the library's")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain, saving = [], []
        for _ in range(a.rounds):
            plain.append(speed(folder, a.iterations, 100000, a.threads))
            saving.append(speed(folder, a.iterations, 20, a.threads))
        p, s = statistics.median(plain), statistics.median(saving)
        print(f"stall: {a.iterations} iterations, medians of {a.rounds} rounds, "
              f"BLAS threads: {a.threads or 'default'}, {os.cpu_count()} cores")
        print(f"  without checkpoints    {p:10,.0f} samples/s")
        print(f"  checkpoint every 20    {s:10,.0f} samples/s   ratio {s / p:.3f} (target >= 0.95)")
        arrays = state_arrays(folder)
        size = sum(v.nbytes for v in arrays.values())
        ours = best_seconds(lambda: checkpoint.save({"arrays": arrays}, folder / "ckpt", 1))
        floor = best_seconds(lambda: savez_synced(arrays, folder / "plain.npz"))
        print(f"write: {size / 1e6:.1f} MB, best of 5")
        print(f"  numpy.savez + fsync    {floor * 1e3:8.1f} ms  {size / floor / 1e9:.2f} GB/s (the floor)")
        print(f"  checkpoint.save        {ours * 1e3:8.1f} ms  {size / ours / 1e9:.2f} GB/s   "
              f"ratio {floor / ours:.3f} (target >= 0.8)")


if __name__ == "__main__":
    main()
