"""PyTorch DataLoader peer for the data pipeline benchmark (benchmarks/data_pipeline.py).

Reads a uint8 ``.npy`` file of images (and a labels file) the way a PyTorch user would: a
map-style Dataset over ``numpy.load(mmap_mode="r")`` whose ``__getitem__`` converts one
example to float32 in [0, 1] (divided by 255, as ``dataset.normalize=unit`` does), and a
DataLoader with ``shuffle=True`` and the default collate. Workers are persistent; the first
``--warmup`` batches (their start included) are not timed.

Run (with the separate torch venv):

    /work/torch-venv/bin/python benchmarks/torch_data_peer.py --x X.npy --y Y.npy [--workers 2]

Prints one line of JSON: {"peer": "pytorch", "version": ..., "workers": ..., "samples_per_s": ...}
"""

import argparse
import itertools
import json
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class MappedImages(Dataset):
    def __init__(self, x_path, y_path, augment=False):
        self.x_path, self.y, self.augment = x_path, np.load(y_path), augment
        self.x = None  # opened in each worker process

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if self.x is None:
            self.x = np.load(self.x_path, mmap_mode="r")
        x = torch.from_numpy(self.x[i].astype(np.float32) / np.float32(255))
        return (crop_and_flip(x) if self.augment else x), int(self.y[i])


def crop_and_flip(x, padding=4):
    """torchvision's RandomCrop(size, padding) then RandomHorizontalFlip() on a tensor image."""
    h, w = x.shape[-2:]
    padded = torch.nn.functional.pad(x, (padding, padding, padding, padding))
    top, left = (int(v) for v in torch.randint(0, 2 * padding + 1, (2,)))
    x = padded[..., top:top + h, left:left + w]
    return x.flip(-1) if torch.rand(1) < 0.5 else x


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batches", type=int, default=600)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--augment", action="store_true", help="random crop (pad 4) and flip")
    args = p.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(MappedImages(args.x, args.y, args.augment), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    batches = itertools.chain.from_iterable(itertools.repeat(loader))  # epoch after epoch
    for _ in range(args.warmup):
        next(batches)
    start = time.perf_counter()
    for _ in range(args.batches):
        x, y = next(batches)
    elapsed = time.perf_counter() - start
    assert x.dtype == torch.float32 and x.ndim == 4
    print(json.dumps({"peer": "pytorch", "version": torch.__version__, "workers": args.workers,
                      "samples_per_s": args.batches * args.batch_size / elapsed}))


if __name__ == "__main__":
    main()
