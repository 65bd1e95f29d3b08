"""PyTorch CPU peer for the optimizer benchmark: parameter updates per second.

For each named optimizer, builds ``--tensors`` float32 parameters totalling ``--params``
elements with random gradients and times ``optimizer.step()`` (gradients untouched between
steps). Uses the fused implementation where PyTorch has one on the CPU, else foreach.
Prints one JSON object per line: {"optimizer", "impl", "params_per_s"}.

    /work/torch-venv/bin/python benchmarks/torch_optim_peer.py --names adam sgd
"""

import argparse
import json
import time

import torch

MAKERS = {
    "sgd": lambda p, **k: torch.optim.SGD(p, lr=0.01, momentum=0.9, **k),
    "adam": lambda p, **k: torch.optim.Adam(p, lr=0.001, **k),
    "adamw": lambda p, **k: torch.optim.AdamW(p, lr=0.001, **k),
    "adagrad": lambda p, **k: torch.optim.Adagrad(p, lr=0.01, **k),
    "rmsprop": lambda p, **k: torch.optim.RMSprop(p, lr=0.001, **k),
    "adadelta": lambda p, **k: torch.optim.Adadelta(p, lr=1.0, **k),
    "adamax": lambda p, **k: torch.optim.Adamax(p, lr=0.002, **k),
    "nadam": lambda p, **k: torch.optim.NAdam(p, lr=0.001, **k),
}


def make(name, params):
    for impl, kwargs in (("fused", {"fused": True}), ("foreach", {"foreach": True}), ("default", {})):
        try:
            return impl, MAKERS[name](params, **kwargs)
        except (TypeError, RuntimeError, ValueError):
            continue
    raise RuntimeError(name)


def measure(name, total, tensors, steps):
    torch.manual_seed(0)
    size = total // tensors
    params = [torch.nn.Parameter(torch.randn(size)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn(size)
    impl, opt = make(name, params)
    opt.step()
    try:
        opt.step()
    except RuntimeError:
        impl, opt = "foreach", MAKERS[name](params, foreach=True)
        opt.step()
    start = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return impl, steps * size * tensors / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", nargs="+", default=sorted(MAKERS))
    parser.add_argument("--params", type=int, default=10_000_000)
    parser.add_argument("--tensors", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    for name in args.names:
        if name not in MAKERS:
            continue
        impl, rate = measure(name, args.params, args.tensors, args.steps)
        print(json.dumps({"optimizer": name, "impl": impl, "params_per_s": rate}), flush=True)


if __name__ == "__main__":
    main()
