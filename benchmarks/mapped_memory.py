"""Resident memory while training on a memory-mapped set much larger than the page budget.

A uint8 image file of shape (N, 1, 28, 28) (``--gigabytes``, default 1.5 GB) and int64
labels are written to a temporary folder; then, each in a fresh process, an MLP (784-64-10,
SGD, batch 100, ``dataset.normalize=unit``, 1% held out) trains ``--iterations`` steps
through the library's loop (``prepare`` and ``StandardUpdater``, as a run does) on:

- ``open_npy`` with the default budget (pages dropped from the process past it), prefetch 0
  and 2;
- ``open_npy`` with ``budget=None`` (never dropped);
- ``numpy.load(mmap_mode="r")`` (NumPy's memmap, nothing dropped).

A thread samples ``/proc/self/status`` every 20 ms from before the file is opened: the peaks
of ``RssFile`` (file pages mapped into the process, the libraries' included: its growth is
printed too) and ``RssAnon`` (its own memory), and at the end ``VmHWM`` (the kernel's exact
peak of the whole resident set). Each is printed against the file's size, with the training
speed after 200 untimed iterations (BLAS on one thread: the model is small, and a second
BLAS thread only fights the prefetch thread for the cores; the machine may be shared, so
speeds are indicative).

    python benchmarks/mapped_memory.py [--gigabytes 1.5] [--iterations 1000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy
from proc_status import status

from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import SerialIterator, Splits, prepare
from trainer_run.data.mapped import open_npy
from trainer_run.models import MLP
from trainer_run.updaters import Batches, StandardUpdater

ROW = (1, 28, 28)
MODES = {  # name: (reader, budget, prefetch)
    "open_npy, default budget, prefetch 0": ("open_npy", "default", 0),
    "open_npy, default budget, prefetch 2": ("open_npy", "default", 2),
    "open_npy, never dropped, prefetch 0": ("open_npy", None, 0),
    "numpy memmap, prefetch 0": ("memmap", None, 0),
}


def write_files(directory: Path, gigabytes: float) -> tuple[Path, Path]:
    """x.npy of uint8 images and y.npy of labels 0..9, written a chunk at a time."""
    n = int(gigabytes * 1e9) // math.prod(ROW)
    x_path, y_path = directory / "x.npy", directory / "y.npy"
    x = numpy.lib.format.open_memmap(x_path, mode="w+", dtype=numpy.uint8, shape=(n, *ROW))
    rng = numpy.random.default_rng(0)
    step = 100_000
    for start in range(0, n, step):
        x[start:start + step] = rng.integers(0, 256, size=(min(step, n - start), *ROW), dtype=numpy.uint8)
    x.flush()
    del x
    numpy.save(y_path, rng.integers(0, 10, size=n))
    os.sync()  # no write-back of the new files during the measurements
    return x_path, y_path


class Sampler(threading.Thread):
    """The peaks of RssFile and RssAnon, sampled every ``interval`` seconds until stopped."""

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.interval, self.peaks, self.done = interval, {"RssFile": 0, "RssAnon": 0}, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = status()
            for key in self.peaks:
                self.peaks[key] = max(self.peaks[key], now[key])
            self.done.wait(self.interval)


def child(x_path: str, y_path: str, reader: str, budget, prefetch: int, iterations: int,
          warmup: int = 200) -> dict:
    """Trains as the module docstring says and returns the measurements (memory from before
    the file is opened, speed after ``warmup`` iterations)."""
    before = status()
    sampler = Sampler()
    sampler.start()
    if reader == "open_npy":
        x = open_npy(x_path) if budget == "default" else open_npy(x_path, budget=budget)
    else:
        x = numpy.load(x_path, mmap_mode="r")
    data = prepare(Splits((x, numpy.load(y_path))), numpy.random.default_rng(0), val_fraction=0.01,
                   normalize="unit")
    backend = get_backend("numpy", seed=0)
    model = MLP(784, 10, backend, hidden_sizes=[64])
    iterator = SerialIterator(data.train, 100, rng=numpy.random.default_rng(1))
    updater = StandardUpdater(iterator, optimizers.create("sgd", learning_rate=0.1), model,
                              batches=Batches(backend, prefetch=prefetch))
    for _ in range(warmup):
        updater.update()
    start = time.perf_counter()
    for _ in range(iterations):
        updater.update()
    elapsed = time.perf_counter() - start
    updater.finalize()
    sampler.done.set()
    sampler.join()
    return {"before": before, "peaks": sampler.peaks, "VmHWM": status()["VmHWM"],
            "samples_per_s": iterations * 100 / elapsed, "drops": getattr(x, "drops", None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.5)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--child", nargs=5, metavar=("X", "Y", "READER", "BUDGET", "PREFETCH"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        x_path, y_path, reader, budget, prefetch = args.child
        budget = None if budget == "None" else budget
        print(json.dumps(child(x_path, y_path, reader, budget, int(prefetch), args.iterations)))
        return
    with tempfile.TemporaryDirectory() as directory:
        x_path, y_path = write_files(Path(directory), args.gigabytes)
        size = x_path.stat().st_size
        print(f"{size / 1e9:.2f} GB uint8 {ROW} images memory-mapped, MLP 784-64-10, batch 100, "
              f"{args.iterations} iterations; peaks (sampled; VmHWM exact) against the file's size, "
              "and the growth of RssFile from before the file was opened")
        print(f"  {'':38s} {'RssFile':>16s} {'growth':>16s} {'RssAnon':>16s} {'VmHWM':>16s} "
              f"{'samples/s':>10s}  drops")
        for name, (reader, budget, prefetch) in MODES.items():
            command = [sys.executable, __file__, "--iterations", str(args.iterations), "--child",
                       str(x_path), str(y_path), reader, str(budget), str(prefetch)]
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
            result = json.loads(subprocess.run(command, capture_output=True, text=True, check=True,
                                               env=env).stdout.strip().splitlines()[-1])
            peaks = result["peaks"]

            def shown(value):
                return f"{value / 2**20:7.0f} MiB {value / size:5.1%}"

            growth = peaks["RssFile"] - result["before"]["RssFile"]
            print(f"  {name:38s} {shown(peaks['RssFile'])} {shown(growth)} {shown(peaks['RssAnon'])} "
                  f"{shown(result['VmHWM'])} {result['samples_per_s']:10,.0f}  {result['drops']}")


if __name__ == "__main__":
    main()
