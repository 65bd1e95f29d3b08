"""Where one training iteration of ``model=cnn`` or ``model=resnet`` spends its time: by stage
of a real run, and by function (forward and backward of each layer).

1. **Stages**: a real ``trainer-run dataset=idx model=M debug=profile`` (SGD, batch 100) on the
   uint8 MNIST-shaped IDX files of ``convnets_run.py``; its ``profile.json`` gives ms per
   iteration for ``data`` (batch drawn and converted from uint8), ``forward``, ``backward``,
   ``update``, ``extensions`` and ``other``, the mean over ``--run-iterations`` iterations (the
   first, which loads numba's compiled loops, and the evaluation that ends the run included).
2. **Functions**: the same network stepped in this process (``StandardUpdater``, SGD, a fixed
   batch), with every differentiable function's ``forward`` and ``backward`` timed, in the
   order they run. A row is one call site: the function, its input's shape and memory layout
   (the order of the axes from the largest stride to the smallest: ``NCHW``, or ``CHWN`` for a
   convolution's batch-innermost output); calls alike in all three are summed. Times are ms
   per iteration, the mean of ``--iterations`` after ``--warmup``.

It measures whatever ``trainer_run`` the interpreter imports, so running it with an older
checkout's interpreter gives the "before" table. Both parts use the default threads.

    python benchmarks/layer_profile.py [--models cnn,resnet] [--iterations 30] [--warmup 5]
                                       [--run-iterations 200]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from convnets_run import make_data, run

BATCH = 100


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="cnn,resnet")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--run-iterations", type=int, default=200)
    return p.parse_args()


def stages(model: str, folder: Path, iterations: int) -> dict:
    """ms per iteration by stage of a real profiled run."""
    out = Path(tempfile.mkdtemp(prefix=f"profile-{model}-", dir=folder))
    run([sys.executable, "-m", "trainer_run.cli", "dataset=idx", f"model={model}", "optimizer=sgd",
         "debug=profile", f"dataset.batch_size={BATCH}", f"dataset.train_images={folder / 'train-images'}",
         f"dataset.train_labels={folder / 'train-labels'}", f"trainer.max_iterations={iterations}",
         f"trainer.eval_interval={iterations}", f"trainer.checkpoint_interval={iterations}",
         "trainer.progress=false", f"hydra.run.dir={out}"], dict(os.environ), folder)
    profile = json.loads((out / "profile.json").read_text())
    return {name: stage["per_iteration_ms"] for name, stage in profile["stages"].items()
            if stage.get("per_iteration_ms") is not None}


def layout(a) -> str:
    if getattr(a, "ndim", 0) != 4:
        return ""
    order = sorted(range(4), key=lambda axis: -a.strides[axis])
    return "".join("NCHW"[axis] for axis in order)


def timed_functions(model_name: str, iterations: int, warmup: int) -> dict:
    """ms per iteration by (order, function, pass, input shape, layout)."""
    import numpy

    from trainer_run import functions, memory, optimizers
    from trainer_run.autograd import Function
    from trainer_run.backend import get_backend
    from trainer_run.data import ArrayDataset, SerialIterator
    from trainer_run.models import CNN, ResNet
    from trainer_run.updaters import Batches, StandardUpdater

    times, seen = collections.defaultdict(float), {}

    def wrap(cls):
        forward, backward = cls.forward, cls.backward

        def timed(kind, method, self, a):
            start = time.perf_counter()
            result = method(self, *a)
            site = seen.setdefault((cls.__name__, kind, a[0].shape, layout(a[0])), len(seen))
            times[(site, cls.__name__, kind, a[0].shape, layout(a[0]))] += time.perf_counter() - start
            return result

        cls.forward = lambda self, *a: timed("forward", forward, self, a)
        cls.backward = lambda self, *a: timed("backward", backward, self, a)

    modules = [m for name, m in sys.modules.items() if name.startswith(functions.__name__ + ".")]
    for cls in {v for m in modules for v in vars(m).values()
                if isinstance(v, type) and issubclass(v, Function) and "forward" in vars(v)}:
        wrap(cls)
    getattr(memory, "reuse_freed_blocks", lambda: None)()  # as trainer-run does (absent before)
    backend = get_backend("numpy", seed=0)
    model = {"cnn": CNN, "resnet": ResNet}[model_name]((1, 28, 28), 10, backend)
    rng = numpy.random.default_rng(0)
    x = rng.random((BATCH, 1, 28, 28), dtype=numpy.float32)
    t = rng.integers(0, 10, BATCH)
    iterator = SerialIterator(ArrayDataset(x, t), BATCH, rng=numpy.random.default_rng(1))
    updater = StandardUpdater(iterator, optimizers.SGD(learning_rate=0.01), model,
                              batches=Batches(backend))
    for _ in range(warmup):
        updater.update()
    times.clear()
    for _ in range(iterations):
        updater.update()
    return {key: 1e3 * total / iterations for key, total in times.items()}


def show(model: str, by_stage: dict, by_function: dict) -> None:
    print(f"\n{model}: ms per iteration (batch {BATCH})")
    print("  stages of a real run (debug=profile): " + ", ".join(
        f"{name} {ms:.1f}" for name, ms in by_stage.items()) + f"; total {sum(by_stage.values()):.1f}")
    print(f"  {'function':<22} {'pass':<9} {'input':<18} {'layout':<7} {'ms':>7}")
    for (_, name, kind, shape, lay), ms in sorted(by_function.items()):
        if ms >= 0.05:
            print(f"  {name:<22} {kind:<9} {str(shape):<18} {lay:<7} {ms:7.2f}")
    per_kind = collections.Counter()
    for (_, _, kind, _, _), ms in by_function.items():
        per_kind[kind] += ms
    print("  functions in all: " + ", ".join(f"{kind} {ms:.1f}" for kind, ms in per_kind.items()))


def main():
    args = parse_args()
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_data(folder)
        for model in args.models.split(","):
            show(model, stages(model, folder, args.run_iterations),
                 timed_functions(model, args.iterations, args.warmup))
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
