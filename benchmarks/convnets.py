"""Training throughput of ``model=cnn`` and ``model=resnet`` against PyTorch CPU eager.

Each timed iteration is one training step on an MNIST-shaped float32 batch of 100
(1x28x28, 10 classes): forward, softmax cross entropy, backward and a plain SGD step
(learning rate 0.01), on the identical architecture:

- ``cnn``: conv(5x5, 32, same) - ReLU - maxpool(2) - conv(5x5, 64, same) - ReLU - maxpool(2) -
  linear(512) - ReLU - linear(10) (``model=cnn``'s defaults);
- ``resnet``: ``model=resnet``'s default pre-activation ResNet-8 of width 16, batch norm in
  training mode.

Ours is trainer-run's ``StandardUpdater`` with ``optimizer=sgd``, so the numbers include
the flat-buffer bookkeeping a run has, in a process that keeps freed blocks for reuse as
``trainer-run`` does (``memory.reuse_freed_blocks``). PyTorch runs in its own virtual environment
(``$TORCH_PYTHON``, else ``/work/torch-venv/bin/python``; skipped when absent) as a
subprocess of this file with ``--peer``; each side runs in a fresh process, so the peak
resident memory (``ru_maxrss``) of each is reported too. Both use ``--threads`` threads.

    python benchmarks/convnets.py [--models cnn,resnet] [--rounds 3] [--iterations 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from peers import torch_python

N, CLASSES, SHAPE = 100, 10, (1, 28, 28)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="cnn,resnet")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--side", choices=["ours", "peer"], help="run one side in this process")
    p.add_argument("--model", help="with --side: the model")
    return p.parse_args()


def batch(numpy):
    rng = numpy.random.default_rng(0)
    return (rng.random((N, *SHAPE), dtype=numpy.float32),
            rng.integers(0, CLASSES, size=N).astype(numpy.int64))


def timed(step, iterations: int, warmup: int) -> float:
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    return iterations * N / (time.perf_counter() - start)


def ours(model_name: str, iterations: int, warmup: int) -> float:
    import numpy

    from trainer_run import memory, optimizers
    from trainer_run.backend import get_backend
    from trainer_run.data import ArrayDataset, SerialIterator
    from trainer_run.models import CNN, ResNet
    from trainer_run.updaters import Batches, StandardUpdater

    memory.reuse_freed_blocks()  # as trainer-run does
    backend = get_backend("numpy", seed=0)
    klass = {"cnn": CNN, "resnet": ResNet}[model_name]
    model = klass(SHAPE, CLASSES, backend)
    x, t = batch(numpy)
    iterator = SerialIterator(ArrayDataset(x, t), N, rng=numpy.random.default_rng(1))
    updater = StandardUpdater(iterator, optimizers.SGD(learning_rate=0.01), model,
                              batches=Batches(backend))
    return timed(updater.update, iterations, warmup)


def peer(model_name: str, iterations: int, warmup: int) -> float:
    import numpy
    import torch
    from torch import nn

    model = torch_network(nn, model_name)
    x, t = (torch.from_numpy(a) for a in batch(numpy))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), t).backward()
        opt.step()

    return timed(step, iterations, warmup)


def torch_network(nn, model_name: str):
    """PyTorch's copy of ``model=cnn`` or ``model=resnet`` (their defaults) for 1x28x28 images."""
    if model_name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, CLASSES))
    return _torch_resnet(nn, width=16, blocks=1)


def _torch_resnet(nn, width: int, blocks: int):
    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.bn1, self.bn2 = nn.BatchNorm2d(cin), nn.BatchNorm2d(cout)
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            changes = stride != 1 or cin != cout
            self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if changes else None

        def forward(self, x):
            h = nn.functional.relu(self.bn1(x))
            skip = x if self.shortcut is None else self.shortcut(h)
            return self.conv2(nn.functional.relu(self.bn2(self.conv1(h)))) + skip

    layers, c = [nn.Conv2d(1, width, 3, 1, 1, bias=False)], width
    for stage, out in enumerate((width, 2 * width, 4 * width)):
        for b in range(blocks):
            layers.append(Block(c, out, 2 if stage > 0 and b == 0 else 1))
            c = out
    layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, CLASSES)]
    return nn.Sequential(*layers)


def run_side(side: str, model: str, args) -> dict | None:
    python = sys.executable
    if side == "peer":
        python = torch_python()
        if python is None:
            return None
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "OPENBLAS_NUM_THREADS": str(args.threads),
           "MKL_NUM_THREADS": str(args.threads)}
    out = subprocess.run([python, __file__, "--side", side, "--model", model, "--iterations",
                          str(args.iterations), "--warmup", str(args.warmup), "--threads", str(args.threads)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    args = parse_args()
    if args.side:
        if args.side == "peer":
            import torch
            torch.set_num_threads(args.threads)
        rate = (ours if args.side == "ours" else peer)(args.model, args.iterations, args.warmup)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"samples_per_s": rate, "peak_mib": peak}))
        return
    print(f"batch {N} of {SHAPE} float32, SGD, {args.rounds} rounds of {args.iterations} iterations "
          f"(best), {args.threads} threads; each side in a fresh process")
    for model in args.models.split(","):
        best = {"ours": None, "peer": None}
        for _ in range(args.rounds):
            for side in best:
                result = run_side(side, model, args)
                if result is not None and (best[side] is None
                                           or result["samples_per_s"] > best[side]["samples_per_s"]):
                    best[side] = result
        o, p = best["ours"], best["peer"]
        for name, side in (("trainer-run", o), ("PyTorch", p)):
            if side is not None:
                print(f"  {model:7s} {name:12s} {side['samples_per_s']:8,.0f} samples/s, "
                      f"peak {side['peak_mib']:6.0f} MiB")
        if p is not None:
            print(f"  {model:7s} ratio trainer-run / PyTorch: {o['samples_per_s'] / p['samples_per_s']:.2f}x")


if __name__ == "__main__":
    main()
