"""End-to-end training throughput: trainer-run against PyTorch CPU eager, same shapes.

MLP 784-1000-1000-10 (ReLU), batch 100, Adam (lr 0.001), synthetic MNIST-shaped data.
Each timed iteration is a full training step: batch, forward, loss, backward, optimizer.
The two are run alternately ``--rounds`` times in the same session (the machine is shared
and noisy) and the median of each is reported, with their ratio and the limit set by the
matrix multiplies alone (measured here with NumPy on the same shapes).

PyTorch runs in its own virtual environment, never as a dependency of this project: the
script uses ``$TORCH_PYTHON``, else a venv it knows (:func:`peers.torch_python`), else skips it.

With ``--npy`` it also trains the same MLP on the same data stored in ``.npy`` files, against
the data in memory, both prepared by the run's rules (:func:`trainer_run.data.prepare`, the
same held-out split, so the batches are the same bits): through the ``dataset=npy`` loader
(:func:`trainer_run.data.array_files.npy`), and with both files memory-mapped by
:func:`trainer_run.data.mapped.open_npy`; ``--prefetch`` sets the updater's prefetch for
these three. It reports each one's ratio to the data in memory: of the bests, and the median
of the ratios within a round (less sensitive to load that changes between rounds).

    python benchmarks/e2e_mlp.py [--rounds 3] [--iterations 200] [--optimizer adam|sgd]
                                 [--npy] [--prefetch 0]
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

from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import ArrayDataset, SerialIterator, Splits, mnist_like, prepare
from trainer_run.data.array_files import npy
from trainer_run.data.mapped import open_npy
from trainer_run.models import MLP
from trainer_run.updaters import Batches, StandardUpdater

SIZES = (784, 1000, 1000, 10)
HERE = Path(__file__).resolve().parent
OPTIMIZERS = {"adam": ("adam", {"learning_rate": 0.001}),
              "sgd": ("sgd", {"learning_rate": 0.1, "momentum": 0.9})}


def trainer_run_samples_per_s(batch: int, iterations: int, warmup: int, optimizer: str,
                              dataset=None, prefetch: int = 0) -> float:
    """Training samples/s on ``dataset`` (None: 10,000 MNIST-shaped examples in memory)."""
    backend = get_backend("numpy", seed=0)
    if dataset is None:
        dataset = ArrayDataset(*mnist_like(10_000, numpy.random.default_rng(0)))
    model = MLP(SIZES[0], SIZES[-1], backend, hidden_sizes=list(SIZES[1:-1]))
    name, kwargs = OPTIMIZERS[optimizer]
    iterator = SerialIterator(dataset, batch, rng=numpy.random.default_rng(1))
    updater = StandardUpdater(iterator, optimizers.create(name, **kwargs), model,
                              batches=Batches(backend, prefetch=prefetch))
    for _ in range(warmup):
        updater.update()
    start = time.perf_counter()
    for _ in range(iterations):
        updater.update()
    elapsed = time.perf_counter() - start
    updater.finalize()
    return iterations * batch / elapsed


def storages(directory: Path) -> dict:
    """The training set of 10,000 MNIST-shaped examples, prepared by the run's rules, by where
    it is stored: in memory, in .npy files read by the dataset=npy loader, and in .npy files
    both memory-mapped by open_npy."""
    x, t = mnist_like(10_000, numpy.random.default_rng(0))
    x_path, y_path = directory / "x.npy", directory / "y.npy"
    numpy.save(x_path, x)
    numpy.save(y_path, t)
    loaded = {"in memory": (x, t), "dataset=npy loader": npy(str(x_path), str(y_path)),
              "open_npy x and y": Splits((open_npy(x_path), open_npy(y_path)))}
    return {name: prepare(result, numpy.random.default_rng(2)).train for name, result in loaded.items()}


def npy_comparison(args) -> None:
    """The MLP trained on each storage of :func:`storages`, ``args.rounds`` times alternating;
    each one's best against the best in memory."""
    with tempfile.TemporaryDirectory() as directory:
        datasets = storages(Path(directory))
        kinds = {name: type(d.dataset.arrays[0]).__name__ for name, d in datasets.items()}
        results: dict = {name: [] for name in datasets}
        for _ in range(args.rounds):
            for name, dataset in datasets.items():
                results[name].append(trainer_run_samples_per_s(
                    args.batch_size, args.iterations, args.warmup, args.optimizer, dataset,
                    args.prefetch))
    memory = results["in memory"]
    print(f"  the same training by storage (prepared data, prefetch {args.prefetch}; best of "
          f"{args.rounds} and its ratio to in memory's best, the median of the rounds' ratios, "
          "all rounds in brackets):")
    for name, values in results.items():
        paired = statistics.median(v / m for v, m in zip(values, memory))
        print(f"    {name:20s} ({kinds[name]:11s}) {max(values):9,.0f} samples/s  "
              f"{max(values) / max(memory):5.3f}x  {paired:5.3f}x  {[round(v) for v in values]}")


def torch_samples_per_s(batch: int, iterations: int, warmup: int, optimizer: str) -> float | None:
    python = torch_python()
    if python is None:
        return None
    args = [python, str(HERE / "torch_peer.py"), "--batch-size", str(batch), "--iterations",
            str(iterations), "--warmup", str(warmup), "--optimizer", optimizer,
            "--sizes", ",".join(map(str, SIZES))]
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["samples_per_s"]


def matmul_limit_samples_per_s(batch: int, repeats: int = 100) -> tuple[float, float]:
    """(samples/s, GFLOP/s) if an iteration were only its matrix multiplies."""
    rng = numpy.random.default_rng(0)
    ops = []
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        x = rng.random((batch, n_in), dtype=numpy.float32)
        w = rng.random((n_out, n_in), dtype=numpy.float32)
        gy = rng.random((batch, n_out), dtype=numpy.float32)
        ops.append((x, w.T, numpy.empty((batch, n_out), numpy.float32)))
        ops.append((gy.T, x, numpy.empty((n_out, n_in), numpy.float32)))
        if i > 0:
            ops.append((gy, w, numpy.empty((batch, n_in), numpy.float32)))
    flops = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b, _ in ops)
    for a, b, o in ops * 10:
        numpy.matmul(a, b, out=o)
    start = time.perf_counter()
    for _ in range(repeats):
        for a, b, o in ops:
            numpy.matmul(a, b, out=o)
    seconds = (time.perf_counter() - start) / repeats
    return batch / seconds, flops / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
    parser.add_argument("--npy", action="store_true",
                        help="also compare the data in .npy files with the data in memory")
    parser.add_argument("--prefetch", type=int, default=0, help="the updater's prefetch with --npy")
    args = parser.parse_args()
    ours, peer, limit = [], [], []
    for _ in range(args.rounds):
        ours.append(trainer_run_samples_per_s(args.batch_size, args.iterations, args.warmup,
                                              args.optimizer))
        result = torch_samples_per_s(args.batch_size, args.iterations, args.warmup, args.optimizer)
        if result is not None:
            peer.append(result)
        limit.append(matmul_limit_samples_per_s(args.batch_size))
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {args.batch_size}, {args.optimizer}, "
          f"{args.rounds} rounds of {args.iterations} iterations (median; all rounds in brackets)")
    print(f"  trainer-run (numpy {numpy.__version__}): {statistics.median(ours):9,.0f} samples/s "
          f"{[round(v) for v in ours]}")
    if peer:
        print(f"  PyTorch CPU eager:              {statistics.median(peer):9,.0f} samples/s "
              f"{[round(v) for v in peer]}")
        print(f"  ratio trainer-run / PyTorch:    {statistics.median(ours) / statistics.median(peer):9.2f}x")
    else:
        print("  PyTorch: skipped (no torch venv; set TORCH_PYTHON to a python with torch 2.13)")
    best = max(limit)
    print(f"  matmul-only limit:              {best[0]:9,.0f} samples/s ({best[1]:.0f} GFLOP/s)")
    print(f"  trainer-run / matmul limit:     {statistics.median(ours) / best[0]:9.2f}")
    if args.npy:
        npy_comparison(args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
