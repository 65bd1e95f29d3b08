"""PyTorch CPU eager peer for the end-to-end MLP training benchmark.

Measures training throughput (samples/s) of a plain PyTorch MLP on a synthetic
MNIST-shaped data set, written the way a user would write it: nn.Sequential of
Linear + ReLU layers, F.cross_entropy, torch.optim.Adam (or SGD with momentum),
shuffled minibatches indexed from a tensor each step. Each timed iteration is
zero_grad, forward, loss, backward, optimizer.step; warmup iterations are run
first and not timed.

Run (with the separate torch venv):

    /work/torch-venv/bin/python benchmarks/torch_peer.py [--threads N] [--optimizer sgd]

Prints one line of JSON to stdout:
    {"peer": "pytorch", "version": ..., "samples_per_s": ..., "iterations": ..., "threads": ...}
"""

import argparse
import json
import time

import numpy as np
import torch

N_EXAMPLES = 10_000


def build_model(sizes):
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def batches(n, batch_size, rng):
    """Yield index tensors of shuffled minibatches forever, reshuffling each epoch."""
    while True:
        perm = torch.from_numpy(rng.permutation(n))
        for start in range(0, n - batch_size + 1, batch_size):
            yield perm[start:start + batch_size]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="784,1000,1000,10",
                   help="comma-separated layer widths: input,hidden...,output")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads(N); default: torch's default")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    args = p.parse_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    if len(sizes) < 2 or not 0 < args.batch_size <= N_EXAMPLES:
        p.error(f"need >= 2 sizes and 0 < batch-size <= {N_EXAMPLES}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    x = torch.from_numpy(rng.random((N_EXAMPLES, sizes[0]), dtype=np.float32))
    t = torch.from_numpy(rng.integers(0, sizes[-1], size=N_EXAMPLES))

    model = build_model(sizes)
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-8)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(idx):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), t[idx])
        loss.backward()
        opt.step()

    it = batches(N_EXAMPLES, args.batch_size, rng)
    for _ in range(args.warmup):
        step(next(it))
    start = time.perf_counter()
    for _ in range(args.iterations):
        step(next(it))
    elapsed = time.perf_counter() - start

    print(json.dumps({
        "peer": "pytorch",
        "version": torch.__version__,
        "samples_per_s": args.iterations * args.batch_size / elapsed,
        "iterations": args.iterations,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
