"""Training throughput of ``model=cnn`` and ``model=resnet`` inside a real ``trainer-run``,
against PyTorch CPU eager on the identical network (issue 27, target 1).

MNIST-shaped data is made locally: IDX files of 6,000 uint8 28x28 images and their uint8
labels, 10 classes (the place of a brighter band: ``predict_memory.images``).

- **trainer-run**: ``trainer-run dataset=idx model=<model> optimizer=sgd
  optimizer.learning_rate=0.01 dataset.batch_size=100``, a subprocess with its default
  threads, logging a row every ``--log-interval`` iterations. Its rate is read from
  ``metrics.jsonl``: the images between the rows at the first logged iteration from
  ``--warmup`` on and the last one up to ``--iterations``, over the difference of their
  ``elapsed_s`` (start-up, loading the data and the first steps do not count; everything a
  run does per iteration does: gathering and normalizing the batch, the step, the
  extensions). The run goes on for one more log interval, so that its end (the final
  validation pass, which comes before the last row, and the last checkpoint) is outside the
  window; no checkpoint falls inside it.
- **PyTorch**: the same network (``convnets.torch_network``), the same IDX files read with
  NumPy, the usual loop: a new permutation of the images each epoch, ``x =
  torch.from_numpy(images[idx]).float().div_(255).unsqueeze(1)``, ``model.train()``, SGD
  (learning rate 0.01), ``cross_entropy``, ``loss.item()``; timed over the same iterations.
  It runs in its own virtual environment (``peers.torch_python``; skipped without one), with
  its default threads, once with each of ``peers.torch_envs()`` (OpenMP's default waits and
  passive ones); the faster counts.

Each round runs ours, then the peer; the best of ``--rounds`` rounds counts for each. The
targets are 0.8x PyTorch for ``cnn`` and 0.7x for ``resnet``. The load average is printed
before and after: on a busy machine the numbers mean little.

    python benchmarks/convnets_run.py [--models cnn,resnet] [--rounds 2] [--iterations 200]
        [--warmup 20] [--log-interval 10]
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
from convnets import torch_network
from peers import torch_envs, torch_python
from predict_memory import images, read_raw_idx

TRAIN, BATCH, LEARNING_RATE = 6000, 100, 0.01
TARGETS = {"cnn": 0.8, "resnet": 0.7}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="cnn,resnet")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--iterations", type=int, default=200, help="end of the timed window")
    p.add_argument("--warmup", type=int, default=20, help="iterations before the timed window")
    p.add_argument("--log-interval", type=int, default=10, help="trainer.log_interval of our run")
    p.add_argument("--side", choices=["peer"], help="run PyTorch's loop in this process")
    p.add_argument("--model", help="with --side: the model")
    p.add_argument("--data", help="with --side: the folder of the IDX files")
    return p.parse_args()


def window(args) -> tuple[int, int]:
    """The iterations after which the timing starts and ends: logged rows of our run."""
    every = args.log_interval
    start, end = -(-args.warmup // every) * every, args.iterations // every * every
    if end <= start:
        sys.exit(f"no logged rows between --warmup {args.warmup} and --iterations "
                 f"{args.iterations} every {every} iterations")
    return start, end


def make_data(folder: Path) -> None:
    from trainer_run.data.idx import write_idx

    x, y = images(TRAIN, 0)
    write_idx(folder / "train-images", x)
    write_idx(folder / "train-labels", y)


def run(command: list[str], env: dict, cwd: Path) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def ours(model: str, folder: Path, args) -> float:
    """Samples per second of a real run between the rows of :func:`window`."""
    start, end = window(args)
    out, last = Path(tempfile.mkdtemp(prefix=f"run-{model}-", dir=folder)), end + args.log_interval
    run([sys.executable, "-m", "trainer_run.cli", "dataset=idx", f"model={model}", "optimizer=sgd",
         f"optimizer.learning_rate={LEARNING_RATE}", f"dataset.batch_size={BATCH}",
         f"dataset.train_images={folder / 'train-images'}",
         f"dataset.train_labels={folder / 'train-labels'}",
         f"trainer.max_iterations={last}", f"trainer.log_interval={args.log_interval}",
         f"trainer.eval_interval={last}", f"trainer.checkpoint_interval={last}",
         "trainer.progress=false",
         f"hydra.run.dir={out}"], dict(os.environ), folder)
    with open(out / "metrics.jsonl") as f:
        elapsed = {row["iteration"]: row["elapsed_s"] for row in map(json.loads, f)}
    return (end - start) * BATCH / (elapsed[end] - elapsed[start])


def peer(model_name: str, folder: Path, args) -> float:
    """Samples per second of PyTorch's usual loop over the same iterations as :func:`ours`."""
    import torch
    from torch import nn

    start, end = window(args)
    x = read_raw_idx(folder / "train-images")
    t = read_raw_idx(folder / "train-labels").astype(numpy.int64)
    torch.manual_seed(0)
    model = torch_network(nn, model_name)
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    model.train()
    rng, total = numpy.random.default_rng(0), 0.0
    order, at = rng.permutation(len(x)), 0
    for iteration in range(1, end + 1):
        if at + BATCH > len(order):
            order, at = rng.permutation(len(x)), 0
        idx, at = order[at:at + BATCH], at + BATCH
        xb = torch.from_numpy(x[idx]).float().div_(255).unsqueeze(1)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), torch.from_numpy(t[idx]))
        loss.backward()
        opt.step()
        total += loss.item()
        if iteration == start:
            began = time.perf_counter()
    return (end - start) * BATCH / (time.perf_counter() - began)


def peer_rates(model: str, folder: Path, args) -> list[float] | None:
    """The peer's samples per second in each of ``peers.torch_envs()``, or None without one."""
    python = torch_python()
    if python is None:
        return None
    command = [python, __file__, "--side", "peer", "--model", model, "--data", str(folder),
               "--iterations", str(args.iterations), "--warmup", str(args.warmup),
               "--log-interval", str(args.log_interval)]
    return [json.loads(run(command, env, folder).splitlines()[-1])["samples_per_s"]
            for env in torch_envs()]


def env_label(env: dict) -> str:
    policy = env.get("OMP_WAIT_POLICY")
    return "OpenMP default waits" if policy is None else f"OMP_WAIT_POLICY={policy}"


def report(model: str, mine: float, theirs: list[float] | None) -> None:
    print(f"  {model:7s} trainer-run {'':24s} {mine:8,.0f} samples/s")
    if theirs is None:
        print(f"  {model:7s} PyTorch: no venv (set TORCH_PYTHON)")
        return
    for env, rate in zip(torch_envs(), theirs):
        print(f"  {model:7s} PyTorch, {env_label(env):27s} {rate:8,.0f} samples/s")
    best, target = max(theirs), TARGETS.get(model)
    verdict = "" if target is None else f" (target {target}x: {'met' if mine / best >= target else 'short'})"
    print(f"  {model:7s} ratio trainer-run / PyTorch (the faster): {mine / best:.2f}x{verdict}")


def load() -> str:
    return f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} cores)"


def main():
    args = parse_args()
    if args.side:
        rate = peer(args.model, Path(args.data), args)
        print(json.dumps({"samples_per_s": rate}))
        return
    start, end = window(args)
    print(f"load average before: {load()}")
    print(f"{TRAIN:,} uint8 images of 1x28x28 (dataset=idx), batch {BATCH}, SGD lr {LEARNING_RATE}, "
          f"default threads; samples/s over iterations {start + 1}-{end}, best of {args.rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_data(folder)
        for model in args.models.split(","):
            mine, theirs = 0.0, None
            for _ in range(args.rounds):
                mine = max(mine, ours(model, folder, args))
                rates = peer_rates(model, folder, args)
                theirs = rates if theirs is None else [max(a, b) for a, b in zip(theirs, rates)]
            report(model, mine, theirs)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
