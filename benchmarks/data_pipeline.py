"""Data pipeline throughput: shuffled batches from a memory-mapped uint8 image file, converted
to float32 in [0, 1], against PyTorch's DataLoader over the same file, and the memory
bandwidth bound.

The data: 60,000 uint8 images of 1x28x28 (random pixels) in a temporary ``.npy`` file and
int64 labels beside it; batches of 100, shuffled every epoch.

- trainer-run: :func:`trainer_run.data.mapped.open_npy` under an ``ArrayDataset`` with
  ``dataset.normalize=unit``, drawn by a ``SerialIterator`` through the updater's own path
  (``StandardUpdater.next_parts``: the gather, the normalization and the move to the
  backend), with ``prefetch`` 0 and 2 (no training step runs, so the thread has no work to
  hide behind; this is the pipeline alone).
- PyTorch (``benchmarks/torch_data_peer.py``, in its own virtual environment): a map-style
  Dataset over ``numpy.load(mmap_mode="r")`` doing the same conversion per example, a
  DataLoader with ``shuffle=True`` and the default collate; ``num_workers`` 0 and 2, the
  better one is the peer.
- The bound: a large NumPy copy's bytes read + written per second, measured here, divided by
  the 784 bytes read + 3,136 bytes written that each example needs at least.

With ``--augment``, the images are CIFAR-shaped (50,000 of 3x32x32) and every training batch
is also augmented as CIFAR recipes do: a random crop of the image padded by 4 pixels and a
horizontal flip with probability 0.5. trainer-run runs ``dataset.transforms=[random_crop,
horizontal_flip]`` on each batch (:mod:`trainer_run.data.transforms`) with ``dataset.workers``
0, 1 and 2 (threads); the peer does the same per example in its ``__getitem__`` with torch
ops, as torchvision's ``RandomCrop(32, padding=4)`` and ``RandomHorizontalFlip()`` do (the
torchvision wheel does not load beside the peer's torch), with ``num_workers`` 0 and 2. The
bound counts the padded copy and the crop as one more write of the example.

With ``--python`` (and ``--augment``), trainer-run reads a dataset of the user's kind: a class
whose ``dataset[i]`` converts one example in Python (the peer's ``__getitem__``, without the
crop and flip, which trainer-run applies to the batch), so ``dataset.workers`` reads it in
worker processes.

Each is measured ``--rounds`` times, alternating (the machine may be shared); the best of
each is reported.

    python benchmarks/data_pipeline.py [--rounds 3] [--batches 600] [--augment [--python]]

PyTorch runs from ``$TORCH_PYTHON``, else ``/work/torch-venv/bin/python`` or
``/work/torchvenv/bin/python``; without one it is skipped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy
from peers import torch_python

from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import ArrayDataset, SerialIterator
from trainer_run.data.augmentation import Augmentation
from trainer_run.data.input_scaling import Normalized, fit
from trainer_run.data.mapped import open_npy
from trainer_run.data.transforms import HorizontalFlip, RandomCrop
from trainer_run.models import MLP
from trainer_run.updaters import Batches, StandardUpdater

HERE = Path(__file__).resolve().parent
SHAPES = {False: (60_000, 1, 28, 28), True: (50_000, 3, 32, 32)}
"""The images, plain and with ``--augment``."""


def write_files(directory: Path, shape: tuple) -> tuple[Path, Path]:
    rng = numpy.random.default_rng(0)
    x_path, y_path = directory / "x.npy", directory / "y.npy"
    numpy.save(x_path, rng.integers(0, 256, size=shape, dtype=numpy.uint8))
    numpy.save(y_path, rng.integers(0, 10, size=shape[0]))
    return x_path, y_path


class PerExample:
    """A dataset of the user's kind: each example read and converted to float32 in [0, 1] in
    Python, as the peer's ``__getitem__`` does."""

    def __init__(self, x_path: Path, y_path: Path):
        self.x, self.y = open_npy(x_path), numpy.load(y_path)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i].astype(numpy.float32) / numpy.float32(255), self.y[i]


def ours_samples_per_s(x_path: Path, y_path: Path, prefetch: int, batches: int, warmup: int,
                       batch_size: int, workers: int = 0, augment: bool = False,
                       python: bool = False) -> float:
    """Batches through ``StandardUpdater.next_parts``, the path every training step takes;
    ``augment``: crop and flip each batch, ``workers``: ``dataset.workers``, ``python``: a
    :class:`PerExample` dataset."""
    train = ArrayDataset(open_npy(x_path), numpy.load(y_path))
    data = PerExample(x_path, y_path) if python else Normalized(train, fit("unit", train, str(x_path)))
    iterator = SerialIterator(data, batch_size, rng=numpy.random.default_rng(1))
    backend = get_backend("numpy", seed=0)
    shape = train.arrays[0].shape[1:]
    model = MLP(int(numpy.prod(shape)), 10, backend, hidden_sizes=[8])  # never run
    transforms = (Augmentation([RandomCrop(4), HorizontalFlip()], numpy.random.SeedSequence(0))
                  if augment else None)
    batches = Batches(backend, prefetch=prefetch, transforms=transforms, workers=workers)
    updater = StandardUpdater(iterator, optimizers.create("sgd"), model, batches=batches)
    try:
        for _ in range(warmup):
            updater.next_parts(iterator, updater.backends)
        start = time.perf_counter()
        for _ in range(batches):
            parts, _ = updater.next_parts(iterator, updater.backends)
        elapsed = time.perf_counter() - start
    finally:
        updater.finalize()
    x = parts[0][0]
    assert x.dtype == numpy.float32 and x.shape == (batch_size, *shape)
    return batches * batch_size / elapsed


def torch_samples_per_s(python: str, x_path: Path, y_path: Path, workers: int, batches: int,
                        warmup: int, batch_size: int, augment: bool = False) -> float:
    args = [python, str(HERE / "torch_data_peer.py"), "--x", str(x_path), "--y", str(y_path),
            "--workers", str(workers), "--batches", str(batches), "--warmup", str(warmup),
            "--batch-size", str(batch_size)] + (["--augment"] if augment else [])
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["samples_per_s"]


def copy_bytes_per_s(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes read plus bytes written per second by one large NumPy copy (best of ``repeats``)."""
    src = numpy.ones(megabytes << 20, numpy.uint8)
    dst = numpy.empty_like(src)
    numpy.copyto(dst, src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        numpy.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=600, help="timed batches per measurement")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--augment", action="store_true", help="CIFAR-shaped, crop and flip")
    parser.add_argument("--python", action="store_true", help="our dataset read per example")
    args = parser.parse_args()
    python = torch_python()
    settings = {"prefetch 0": (0, 0)}
    if not args.python:
        settings[f"prefetch {args.prefetch}"] = (args.prefetch, 0)
    if args.augment:
        settings.update({"workers 1": (0, 1), "workers 2": (0, 2)})
    ours = {name: [] for name in settings}
    peer = {0: [], 2: []}
    bandwidth = []
    shape = SHAPES[args.augment]
    pixels = int(numpy.prod(shape[1:]))
    bytes_read, bytes_written = pixels, pixels * 4 * (2 if args.augment else 1)
    with tempfile.TemporaryDirectory() as directory:
        x_path, y_path = write_files(Path(directory), shape)
        for _ in range(args.rounds):
            for name, (prefetch, workers) in settings.items():
                ours[name].append(ours_samples_per_s(x_path, y_path, prefetch, args.batches,
                                                     args.warmup, args.batch_size, workers,
                                                     args.augment, args.python))
            if python is not None:
                for workers in peer:
                    peer[workers].append(torch_samples_per_s(python, x_path, y_path, workers,
                                                             args.batches, args.warmup,
                                                             args.batch_size, args.augment))
            bandwidth.append(copy_bytes_per_s())
    bound = max(bandwidth) / (bytes_read + bytes_written)
    print(f"uint8 {shape} memory-mapped -> float32 [0, 1]"
          f"{', random crop (pad 4) + flip' if args.augment else ''}"
          f"{', ours read per example in Python' if args.python else ''}, batch {args.batch_size}, "
          f"shuffled; best of {args.rounds} rounds of {args.batches} batches")
    for name, values in ours.items():
        print(f"  trainer-run, {name}:{' ' * (13 - len(name))}{max(values):11,.0f} samples/s "
              f"{[round(v) for v in values]}")
    best_ours = max(max(v) for v in ours.values())
    if python is not None:
        for workers, values in peer.items():
            print(f"  PyTorch DataLoader, {workers} workers:  {max(values):11,.0f} samples/s "
                  f"{[round(v) for v in values]}")
        best_peer = max(max(v) for v in peer.values())
        print(f"  ratio trainer-run (best) / PyTorch (best): {best_ours / best_peer:6.2f}x")
    else:
        print("  PyTorch: skipped (no torch venv; set TORCH_PYTHON to a python with torch)")
    print(f"  memory bandwidth bound: {bound:11,.0f} samples/s (copy {max(bandwidth) / 1e9:.1f} GB/s "
          f"read+written, {bytes_read} + {bytes_written} bytes per example)")
    print(f"  trainer-run (best) / bound: {best_ours / bound:6.2f}")


if __name__ == "__main__":
    main()
