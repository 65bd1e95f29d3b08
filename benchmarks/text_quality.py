"""The char_gpt recipe on real English text, trainer-run against PyTorch's nanoGPT model.

The text is the English (ASCII) files of the vim documentation this machine ships
(``/usr/share/vim/vim90/doc``: 125 files, 3.2 MB, 98 characters), a folder ``dataset.path``
reads in name order. One real ``trainer-run experiment=char_gpt`` run trains on it; PyTorch's
nanoGPT ``model.py`` (``benchmarks/torch_text_peer.py``, in its own virtual environment) trains
on the very token ids that run wrote (its ``tokens.bin``) with the same recipe: block 64, batch
12, 4 layers, 4 heads, 128 wide, AdamW 1e-3 (0.9, 0.99), weight decay 0.1 on matrices, 100
warm-up iterations and a cosine to 1e-4 at 2000, clipping at 1.0. Both measure the validation
loss the same way (the last tenth of the tokens in consecutive blocks of 64, every token
predicted once) every 250 iterations. Prints both curves, the final losses and their ratio
(the target: within 2%), draws both curves in one picture and samples 300 characters of text
from the trained run with ``trainer-generate``.

    TORCH_PYTHON=/path/to/torch-venv/bin/python python benchmarks/text_quality.py \\
        [--iterations 2000] [--seeds 0] [--picture docs/text_quality.png] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy
from peers import torch_python

SOURCE = Path("/usr/share/vim/vim90/doc")
HERE = Path(__file__).parent


def english_text(folder: Path) -> int:
    """Copies the ASCII ``.txt`` files of :data:`SOURCE` into ``folder``; their bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for path in sorted(SOURCE.glob("*.txt")):
        data = path.read_bytes()
        if data.isascii():
            (folder / path.name).write_bytes(data)
            total += len(data)
    return total


def ours(text: Path, run: Path, iterations: int, seed: int) -> list:
    shutil.rmtree(run, ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", "experiment=char_gpt",
                           f"dataset.path={text}", f"trainer.max_iterations={iterations}",
                           f"scheduler.max_update={iterations}", "trainer.eval_interval=250",
                           f"seed={seed}", "trainer.progress=false", f"hydra.run.dir={run}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [[r["iteration"], r["val/loss"]] for r in rows if "val/loss" in r]


def theirs(python: str, run: Path, iterations: int, seed: int) -> list:
    ids = numpy.fromfile(run / "tokens.bin", dtype=numpy.uint16)
    vocab = json.loads((run / "data.json").read_text())["out_size"]
    path = run.parent / "tokens.npy"
    numpy.save(path, ids)
    script = ("import json, sys, numpy; sys.path.insert(0, sys.argv[1]); import torch_text_peer as p; "
              "r = p.train(numpy.load(sys.argv[2]), 'gpt', int(sys.argv[3]), 250, seed=int(sys.argv[4]), "
              "vocab_size=int(sys.argv[5]), lr_decay_iters=int(sys.argv[3])); print(json.dumps(r))")
    done = subprocess.run([python, "-c", script, str(HERE), str(path), str(iterations), str(seed),
                           str(vocab)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])["val_loss"]


def draw(picture: Path, curves: dict, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(6.4, 4))
    for label, points in curves.items():
        axes.plot(*zip(*points), marker="o", label=label)
    axes.set_xlabel("iteration")
    axes.set_ylabel("validation loss (nats per character)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(picture, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--picture", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    python = torch_python()
    if python is None:
        sys.exit("no PyTorch virtual environment: set TORCH_PYTHON")
    work = args.work or Path(tempfile.mkdtemp(prefix="text-quality-"))
    text = work / "text"
    size = english_text(text)
    print(f"text: {size} bytes of {SOURCE} (its {len(list(text.iterdir()))} ASCII files)")
    curves, finals = {}, {"trainer-run": [], "PyTorch": []}
    for seed in args.seeds:
        run = work / f"ours_{seed}"
        mine = ours(text, run, args.iterations, seed)
        peer = theirs(python, run, args.iterations, seed)
        curves[f"trainer-run, seed {seed}"], curves[f"PyTorch nanoGPT, seed {seed}"] = mine, peer
        finals["trainer-run"].append(mine[-1][1])
        finals["PyTorch"].append(peer[-1][1])
        for (it, a), (_, b) in zip(mine, peer):
            print(f"seed {seed} iteration {it:5d}: trainer-run {a:.4f}  PyTorch {b:.4f}")
    a, b = numpy.mean(finals["trainer-run"]), numpy.mean(finals["PyTorch"])
    print(f"final validation loss over {len(args.seeds)} seed(s): trainer-run {a:.4f}, PyTorch "
          f"{b:.4f}, ratio {a / b:.4f} ({'within' if abs(a / b - 1) <= 0.02 else 'outside'} 2%)")
    if args.picture is not None:
        draw(args.picture, curves, f"char_gpt on {size / 1e6:.1f} MB of vim's documentation")
        print(f"picture: {args.picture}")
    sample = subprocess.run([sys.executable, "-m", "trainer_run.cli.generate", work / f"ours_{args.seeds[0]}",
                             "prompt=To ", "max_new_tokens=300", "temperature=0.8", "top_k=40",
                             "seed=0"], capture_output=True, text=True)
    print("sample (trainer-generate RUN prompt='To ' max_new_tokens=300 temperature=0.8 top_k=40 "
          f"seed=0):\n{sample.stdout}{sample.stderr}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
