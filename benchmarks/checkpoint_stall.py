"""What checkpoints cost the loop, and how fast one is written.

- Stall: ``trainer-run`` on an MLP 784-1000-1000-10 with Adam (``dataset=mnist_like``, batch
  100; its checkpoints hold about 21 MB), ``--iterations`` iterations with a checkpoint every
  20 and with none but the last, alternating ``--rounds`` times (the machine may be shared).
  Each run's speed is ``summary.json``'s ``samples_per_s`` (training time alone). Target: with
  checkpoints at least 0.95x without.
- Write: :func:`trainer_run.storage.checkpoint.save` of that state's arrays (the peer: ``numpy.savez``
  of the same arrays to one file followed by ``fsync``; the bound: the disk's sequential
  write of as many bytes from one buffer, with ``fsync``), the three timed in turn, best of
  ``--writes``. Target: at least 0.8x the peer's speed.

    python benchmarks/checkpoint_stall.py [--rounds 3] [--iterations 400] [--threads 1]
        [--writes 9] [--write-only]
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

from trainer_run.storage import checkpoint

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


def disk_write_synced(data: numpy.ndarray, path: Path) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def best_seconds(actions: dict, rounds: int) -> dict:
    """The best time of each action, the actions taken in turn (a shared machine's load
    falls on all of them alike)."""
    times: dict = {name: [] for name in actions}
    for _ in range(rounds):
        for name, action in actions.items():
            start = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def write_speeds(folder: Path, rounds: int) -> None:
    arrays = state_arrays(folder)
    size = sum(v.nbytes for v in arrays.values())
    flat = numpy.concatenate([v.reshape(-1).view(numpy.uint8) for v in arrays.values()])
    best = best_seconds({
        "bound": lambda: disk_write_synced(flat, folder / "plain.bin"),
        "peer": lambda: savez_synced(arrays, folder / "plain.npz"),
        "ours": lambda: checkpoint.save({"arrays": arrays}, folder / "ckpt", 1),
    }, rounds)
    print(f"write: {size / 1e6:.1f} MB in {len(arrays)} arrays, best of {rounds}")
    rows = [("disk write + fsync", "bound"), ("numpy.savez + fsync", "peer"),
            ("checkpoint.save", "ours")]
    for label, name in rows:
        print(f"  {label:22s} {best[name] * 1e3:8.1f} ms  {size / best[name] / 1e9:5.2f} GB/s  ({name})")
    print(f"  ratio ours/peer {best['peer'] / best['ours']:.3f} (target >= 0.8), "
          f"ours/bound {best['bound'] / best['ours']:.3f}")


def stall(folder: Path, iterations: int, rounds: int, threads: int | None) -> None:
    plain, saving = [], []
    for _ in range(rounds):
        plain.append(speed(folder, iterations, 100000, threads))
        saving.append(speed(folder, iterations, 20, threads))
    p, s = statistics.median(plain), statistics.median(saving)
    print(f"stall: {iterations} iterations, medians of {rounds} rounds, "
          f"BLAS threads: {threads or 'default'}, {os.cpu_count()} cores")
    print(f"  without checkpoints    {p:10,.0f} samples/s  (peer)")
    print(f"  checkpoint every 20    {s:10,.0f} samples/s  (ours)   ratio {s / p:.3f} (target >= 0.95)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--threads", type=int, default=None,
                        help="BLAS threads of the training runs (1 leaves a core of a 2-core "
                             "machine to the checkpoint writer); default: the library's")
    parser.add_argument("--writes", type=int, default=9, help="timed writes of each kind")
    parser.add_argument("--write-only", action="store_true", help="skip the stall runs")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if not a.write_only:
            stall(folder, a.iterations, a.rounds, a.threads)
        write_speeds(folder, a.writes)


if __name__ == "__main__":
    main()
