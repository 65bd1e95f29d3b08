"""Training speed on a GPU in real runs: ``trainer-run backend=cupy`` against PyTorch's eager loop
on the same network and data, in the same script (issue 38's targets: at least 1.0x PyTorch eager
for mlp, cnn and resnet at batch 100 and 1000).

MNIST-shaped data is made locally (no data can be downloaded on the GPU machine): IDX files of
``--images`` uint8 28x28 images and their labels, 10 classes (``predict_memory.images``).

- **trainer-run**: ``trainer-run backend=cupy dataset=idx model=<model> optimizer=sgd
  optimizer.learning_rate=0.01 dataset.batch_size=<batch>`` (``model=mlp`` with
  ``model.hidden_sizes=[1000,1000]``: the 784-1000-1000-10 net), a subprocess, its rate read
  from ``metrics.jsonl`` between the rows at ``--warmup`` and ``--iterations`` (start-up, CuPy's
  kernel compilation and the first steps do not count; everything a run does per iteration
  does). No evaluation or checkpoint falls inside the window.
- **PyTorch**: the same network (``convnets.torch_network``; the mlp as ``nn.Sequential``), the
  training set on the GPU as float32 in [0, 1], a new permutation of it each epoch, SGD 0.01,
  ``cross_entropy``, the loss read only at the end (its usual loop reads it when it logs),
  default settings (cuDNN's autotuner off, TF32 as PyTorch ships it); timed over the same
  iterations between ``torch.cuda.synchronize()`` calls, in a process of its own.

The last line printed is the summary the device check (``gpu_check.sh``) shows: each model and
batch with its ratio.

    python benchmarks/gpu_run.py [--models mlp,cnn,resnet] [--batches 100,1000]
        [--iterations 300] [--warmup 100] [--device cuda|cpu]

``--device cpu`` runs the same comparison with ``backend=numpy`` and PyTorch on the CPU (a
dry run of the script on a machine without a GPU; PyTorch from ``peers.torch_python``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
from convnets import torch_network
from peers import torch_python
from predict_memory import images, read_raw_idx

LEARNING_RATE = 0.01
MLP_HIDDEN = (1000, 1000)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,cnn,resnet")
    p.add_argument("--batches", default="100,1000")
    p.add_argument("--iterations", type=int, default=300, help="end of the timed window")
    p.add_argument("--warmup", type=int, default=100, help="iterations before the timed window")
    p.add_argument("--images", type=int, default=20000)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--side", choices=["peer"], help="run PyTorch's loop in this process")
    p.add_argument("--model", help="with --side: the model")
    p.add_argument("--batch", type=int, help="with --side: the batch size")
    p.add_argument("--data", help="with --side: the folder of the IDX files")
    return p.parse_args()


def make_data(folder: Path, n: int) -> None:
    from trainer_run.data.idx import write_idx

    x, y = images(n, 0)
    write_idx(folder / "train-images", x)
    write_idx(folder / "train-labels", y)


def run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def ours(model: str, batch: int, folder: Path, args) -> float:
    """Samples per second of a real run between its rows at --warmup and --iterations."""
    out, last = Path(tempfile.mkdtemp(prefix=f"run-{model}-{batch}-", dir=folder)), args.iterations + 1
    backend = "cupy" if args.device == "cuda" else "numpy"
    hidden = [f"model.hidden_sizes=[{','.join(map(str, MLP_HIDDEN))}]"] if model == "mlp" else []
    run([sys.executable, "-m", "trainer_run.cli", f"backend={backend}", "dataset=idx",
         f"model={model}", *hidden, "optimizer=sgd", f"optimizer.learning_rate={LEARNING_RATE}",
         f"dataset.batch_size={batch}", "dataset.val_fraction=0.1",
         f"dataset.train_images={folder / 'train-images'}",
         f"dataset.train_labels={folder / 'train-labels'}",
         f"trainer.max_iterations={last}", f"trainer.log_interval={args.warmup}",
         f"trainer.eval_interval={last}", f"trainer.checkpoint_interval={last}",
         "trainer.progress=false", f"hydra.run.dir={out}"], folder)
    with open(out / "metrics.jsonl") as f:
        elapsed = {row["iteration"]: row["elapsed_s"] for row in map(json.loads, f)}
    start, end = args.warmup, args.iterations // args.warmup * args.warmup
    return (end - start) * batch / (elapsed[end] - elapsed[start])


def peer(model_name: str, batch: int, folder: Path, args) -> float:
    """Samples per second of PyTorch's eager loop, the training set on the device."""
    import torch
    from torch import nn

    device = torch.device(args.device)
    torch.manual_seed(0)
    x = torch.from_numpy(read_raw_idx(folder / "train-images")).to(device).float().div_(255)
    x = x.unsqueeze(1)
    t = torch.from_numpy(read_raw_idx(folder / "train-labels").astype(numpy.int64)).to(device)
    if model_name == "mlp":
        sizes = (784, *MLP_HIDDEN)
        layers = [nn.Flatten()]
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        model = nn.Sequential(*layers, nn.Linear(sizes[-1], 10))
    else:
        model = torch_network(nn, model_name)
    model = model.to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    order, at, total = torch.randperm(len(x), device=device), 0, torch.zeros((), device=device)
    for iteration in range(1, args.iterations + 1):
        if at + batch > len(order):
            order, at = torch.randperm(len(x), device=device), 0
        idx, at = order[at:at + batch], at + batch
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), t[idx])
        loss.backward()
        opt.step()
        total += loss.detach()
        if iteration == args.warmup:
            _synchronize(torch, device)
            began = time.perf_counter()
    _synchronize(torch, device)
    assert torch.isfinite(total).item()
    return (args.iterations - args.warmup) * batch / (time.perf_counter() - began)


def _synchronize(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peer_python(args) -> str | None:
    """PyTorch's interpreter: this one where it has PyTorch (the GPU machine's), else the
    peer's own virtual environment."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return torch_python()


def peer_rate(model: str, batch: int, folder: Path, args) -> float | None:
    python = peer_python(args)
    if python is None:
        return None
    command = [python, __file__, "--side", "peer", "--model", model, "--batch", str(batch),
               "--data", str(folder), "--iterations", str(args.iterations),
               "--warmup", str(args.warmup), "--device", args.device]
    return json.loads(run(command, folder).splitlines()[-1])["samples_per_s"]


def main():
    args = parse_args()
    if args.side:
        rate = peer(args.model, args.batch, Path(args.data), args)
        print(json.dumps({"samples_per_s": rate}))
        return
    if args.iterations // args.warmup * args.warmup <= args.warmup:
        sys.exit("--iterations must reach a row past --warmup (rows every --warmup iterations)")
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {args.images:,} uint8 "
          f"images 1x28x28, SGD lr {LEARNING_RATE}, device {args.device}; samples/s over "
          f"iterations {args.warmup + 1}-{args.iterations // args.warmup * args.warmup}", flush=True)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_data(folder, args.images)
        for model in args.models.split(","):
            for batch in map(int, args.batches.split(",")):
                mine = ours(model, batch, folder, args)
                theirs = peer_rate(model, batch, folder, args)
                ratio = "no PyTorch" if theirs is None else f"{mine / theirs:.2f}x"
                shown = "-" if theirs is None else f"{theirs:,.0f}"
                print(f"{model:7s} batch {batch:5d}  trainer-run {mine:10,.0f}  PyTorch eager "
                      f"{shown:>10s} samples/s  ratio {ratio}", flush=True)
                ratios.append(f"{model} b{batch} {ratio}")
    print("trainer-run / PyTorch eager: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
