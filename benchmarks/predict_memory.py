"""Peak memory and time of ``load_model(run).predict`` on 10,000 MNIST-shaped images through
``model=cnn``, against PyTorch CPU eager running the same weights.

MNIST-shaped data is made locally (no network): IDX files of uint8 28x28 images, 2,000 for
training and ``--images`` (10,000) for predicting, whose class is the place of a brighter band. A
short ``trainer-run dataset=idx model=cnn`` run (``--iterations`` updates, batch 100) makes the
run directory. Then, each in a fresh process:

- **trainer-run**: ``trainer_run.load_model(run).predict(images)`` on the raw uint8 images
  (``read_idx``: memory-mapped), in batches of ``--batch`` (500), ``--rounds`` times;
- **PyTorch**: the same architecture (``nn.Conv2d(1, 32, 5, padding=2)`` ... ``nn.Linear(512,
  10)``) with the run's ``model.npz`` loaded, ``eval()`` and ``torch.inference_mode()``, the
  images divided by 255 as float32, in batches of the same size.

Memory is each process's resident set read from ``/proc/self/status``: ``VmRSS`` once the
model is loaded and the images read (the interpreter, the libraries, the weights), and
``VmHWM``, the kernel's exact peak of the resident set (the same as ``ru_maxrss``), after
predicting; the difference is what predicting took. The theoretical minimum beside it is the
input bytes plus the outputs plus one batch's largest activations (the second convolution's
unfolded input and its output), to compare with what predicting took (which can be less: the
memory a process freed after loading is reused before its peak rises). Time: the best of the
rounds. Both sides use ``--threads`` BLAS / intra-op threads. The two sides' outputs are
compared (largest absolute difference of the logits and agreement of the argmax). The
machine's load average is printed before and after: on a shared machine the times are
indicative; the memory is not affected.

    python benchmarks/predict_memory.py [--images 10000] [--rounds 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
from peers import torch_python
from proc_status import MIB, status

SHAPE = (28, 28)
CLASSES = 10
TRAIN = 2000
BATCH = 100


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--iterations", type=int, default=20, help="training updates of the run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=500, help="images per predicted batch, both sides")
    p.add_argument("--side", choices=["ours", "peer"], help="run one side in this process")
    p.add_argument("--run", help="with --side: the run directory")
    p.add_argument("--out", help="with --side: where to save the outputs (.npy)")
    return p.parse_args()


def images(n: int, seed: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """``n`` uint8 images of noise with one brighter band of 2 rows, whose place is the class."""
    rng = numpy.random.default_rng(seed)
    x = rng.integers(0, 200, (n, *SHAPE), dtype=numpy.uint8)
    y = rng.integers(0, CLASSES, n).astype(numpy.uint8)
    for label in range(CLASSES):
        x[y == label, 4 + 2 * label:6 + 2 * label] += 55
    return x, y


def make_run(folder: Path, n_images: int, iterations: int) -> Path:
    """The IDX files and a short ``model=cnn`` run on them; returns the run directory."""
    from trainer_run.data.idx import write_idx

    for name, (x, y) in (("train", images(TRAIN, 0)), ("test", images(n_images, 1))):
        write_idx(folder / f"{name}-images", x)
        write_idx(folder / f"{name}-labels", y)
    run = folder / "run"
    subprocess.run([sys.executable, "-m", "trainer_run.cli", "dataset=idx", "model=cnn",
                    f"dataset.train_images={folder / 'train-images'}",
                    f"dataset.train_labels={folder / 'train-labels'}", "dataset.normalize=unit",
                    f"dataset.batch_size={BATCH}", f"trainer.max_iterations={iterations}",
                    "trainer.progress=false", f"hydra.run.dir={run}"],
                   check=True, capture_output=True, text=True)
    return run


def ours(run: Path, rounds: int, batch: int) -> tuple[numpy.ndarray, list[float], float]:
    import trainer_run
    from trainer_run.data.idx import read_idx

    trained = trainer_run.load_model(run)
    x = read_idx(run.parent / "test-images")
    loaded = status()["VmRSS"] / MIB
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        y = trained.predict(x, batch_size=batch)
        times.append(time.perf_counter() - start)
    return y, times, loaded


def peer(run: Path, rounds: int, threads: int, batch: int) -> tuple[numpy.ndarray, list[float], float]:
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, CLASSES))
    with numpy.load(run / "model.npz") as saved:
        names = ["conv1", "conv2", "fc1", "fc2"]
        layers = [m for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]
        for name, layer in zip(names, layers):
            layer.weight.data = torch.from_numpy(saved[f"{name}/W"].copy())
            layer.bias.data = torch.from_numpy(saved[f"{name}/b"].copy())
    model.eval()
    x = read_raw_idx(run.parent / "test-images")
    loaded = status()["VmRSS"] / MIB
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        with torch.inference_mode():
            chunks = [model(torch.from_numpy(x[i:i + batch, None].astype(numpy.float32) / 255))
                      for i in range(0, len(x), batch)]
            y = torch.cat(chunks).numpy()
        times.append(time.perf_counter() - start)
    return y, times, loaded


def read_raw_idx(path: Path) -> numpy.ndarray:
    """The uint8 array of a raw (not gzipped) IDX file: images or labels (the peer has no
    trainer-run)."""
    data = path.read_bytes()
    if data[:3] != b"\0\0\x08":
        raise ValueError(f"{path}: not a raw IDX file of uint8")
    ndim = data[3]
    dims = numpy.frombuffer(data, ">u4", ndim, 4)
    return numpy.frombuffer(data, numpy.uint8, offset=4 + 4 * ndim).reshape(*dims)


def side(args) -> None:
    run = Path(args.run)
    if args.side == "ours":
        y, times, loaded = ours(run, args.rounds, args.batch)
    else:
        y, times, loaded = peer(run, args.rounds, args.threads, args.batch)
    numpy.save(args.out, y)
    print(json.dumps({"times": times, "loaded_mib": loaded, "peak_mib": status()["VmHWM"] / MIB}))


def run_side(name: str, run: Path, args) -> dict | None:
    python = sys.executable if name == "ours" else torch_python()
    if python is None:
        return None
    threads = str(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    out = run.parent / f"{name}.npy"
    done = subprocess.run([python, __file__, "--side", name, "--run", str(run), "--out", str(out),
                           "--rounds", str(args.rounds), "--threads", threads, "--batch", str(args.batch)],
                          capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["outputs"] = numpy.load(out)
    return result


def minimum_mib(n: int, batch: int) -> float:
    """What predicting must hold beyond the loaded model: the input bytes, the outputs and one
    batch's largest activations in float32 (``model=cnn``'s second convolution: its unfolded
    input, 32 x 5 x 5 values per output pixel, and its output)."""
    inputs = n * SHAPE[0] * SHAPE[1]
    outputs = n * CLASSES * 4
    unfolded = batch * 32 * 25 * 14 * 14 * 4
    conv_out = batch * 64 * 14 * 14 * 4
    return (inputs + outputs + unfolded + conv_out) / 2**20


def main():
    args = parse_args()
    if args.side:
        return side(args)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} "
          f"({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp), args.images, args.iterations)
        results = {name: run_side(name, run, args) for name in ("ours", "peer")}
    print(f"predict {args.images:,} uint8 images of 1x28x28 through model=cnn in batches of "
          f"{args.batch}, {args.threads} threads, best of {args.rounds}; each side in a fresh process")
    print(f"  {'':12s} {'time':>8s} {'images/s':>9s} {'RSS loaded':>11s} {'peak RSS':>9s} "
          f"{'predict took':>13s}")
    for name, label in (("ours", "trainer-run"), ("peer", "PyTorch")):
        r = results[name]
        if r is None:
            print(f"  {label:12s} (no PyTorch venv: set TORCH_PYTHON)")
            continue
        best = min(r["times"])
        print(f"  {label:12s} {best:7.2f}s {args.images / best:9,.0f} {r['loaded_mib']:8.0f} MiB "
              f"{r['peak_mib']:5.0f} MiB {r['peak_mib'] - r['loaded_mib']:9.0f} MiB")
    print(f"  theoretical minimum of what predicting takes: {minimum_mib(args.images, args.batch):.0f} MiB "
          "(the input bytes, the outputs, one batch's largest activations)")
    o, p = results["ours"], results["peer"]
    print(f"  peak RSS under 1 GiB: {'yes' if o['peak_mib'] < 1024 else 'NO'}")
    if p is not None:
        print(f"  ratio trainer-run / PyTorch: time {min(o['times']) / min(p['times']):.2f}x, peak RSS "
              f"{o['peak_mib'] / p['peak_mib']:.2f}x, memory predicting took "
              f"{(o['peak_mib'] - o['loaded_mib']) / max(p['peak_mib'] - p['loaded_mib'], 1):.2f}x")
        diff = numpy.abs(o["outputs"] - p["outputs"]).max()
        agree = (o["outputs"].argmax(1) == p["outputs"].argmax(1)).mean()
        print(f"  outputs: largest difference {diff:.2e}, argmax agrees on {agree:.2%} of images")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
