"""What augmentation changes, on real images: scikit-learn's handwritten digits (1,797 images
of 8x8, the UCI set it ships), trained through ``trainer_run.train`` with and without
``dataset.transforms``.

No copy of CIFAR-10 is reachable here, so the recipe's transforms are shown where their effect
can be predicted:

- ``random_crop`` (padding 2) teaches shifts: the test images moved by up to 2 pixels in each
  direction (zeros shifted in) should lose far less accuracy with it than without;
- ``horizontal_flip`` teaches mirror images: the test images mirrored should lose far less;
- neither should cost much on the test images as they are.

The same split, model (an MLP of 256 hidden units), optimizer (Adam) and iterations for every
run; each run is trained from ``--seeds`` seeds and the mean test accuracy is printed.

    python benchmarks/augmentation_effect.py [--iterations 1500] [--seeds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from pathlib import Path

import numpy
from sklearn.datasets import load_digits

import trainer_run

SHIFT = 2


def digits(rng) -> tuple:
    """uint8 images (N, 1, 8, 8) and labels, shuffled."""
    x, y = load_digits(return_X_y=True)
    order = rng.permutation(len(y))
    images = (x[order] * 255 / 16).round().astype(numpy.uint8).reshape(-1, 1, 8, 8)
    return images, y[order].astype(numpy.int64)


def shifted(images, rng):
    """Each image moved by a uniform (dy, dx) in [-SHIFT, SHIFT], zeros shifted in."""
    padded = numpy.pad(images, ((0, 0), (0, 0), (SHIFT, SHIFT), (SHIFT, SHIFT)))
    out = numpy.empty_like(images)
    for i, (dy, dx) in enumerate(rng.integers(0, 2 * SHIFT + 1, size=(len(images), 2))):
        out[i] = padded[i, :, dy:dy + 8, dx:dx + 8]
    return out


def accuracy(run, x, y) -> float:
    return float((run.load_model().predict(x).argmax(axis=1) == y).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    rng = numpy.random.default_rng(0)
    x, y = digits(rng)
    train, test = slice(0, 1300), slice(1300, None)
    tests = {"as they are": x[test], f"shifted by up to {SHIFT} px": shifted(x[test], rng),
             "mirrored": x[test][..., ::-1]}
    crop = f"{{_target_: trainer_run.data.transforms.RandomCrop, padding: {SHIFT}}}"
    settings = {"no transforms": "[]", "random_crop": f"[{crop}]",
                "horizontal_flip": "[horizontal_flip]"}
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "digits.npz"
        numpy.savez(path, x=x[train], y=y[train])
        for name, transforms in settings.items():
            scores = []
            for seed in range(args.seeds):
                with contextlib.redirect_stdout(io.StringIO()):  # each run's table
                    run = trainer_run.train(
                        ["dataset=npz", f"dataset.path={path}", "dataset.normalize=unit",
                         "dataset.batch_size=64", "model=mlp", "model.hidden_sizes=[256]",
                         "optimizer=adam", f"trainer.max_iterations={args.iterations}",
                         "trainer.progress=false", f"seed={seed}",
                         f"dataset.transforms={transforms}"],
                        run_dir=Path(folder) / f"{name.replace(' ', '_')}_{seed}")
                scores.append([accuracy(run, images, y[test]) for images in tests.values()])
            results[name] = numpy.mean(scores, axis=0)
    print(f"digits 8x8: {train.stop} training images, {len(y) - train.stop} test images; MLP "
          f"256, Adam, {args.iterations} iterations, mean of {args.seeds} seeds")
    print(f"  {'test accuracy':18}" + "".join(f"{t:>24}" for t in tests))
    for name, values in results.items():
        print(f"  {name:18}" + "".join(f"{v:24.3f}" for v in values))


if __name__ == "__main__":
    main()
