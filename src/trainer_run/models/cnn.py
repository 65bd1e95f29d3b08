"""A small convolutional network for images (``model=cnn``)."""

from __future__ import annotations

from typing import Sequence

from .. import functions as F
from ..backend import Backend
from ..errors import check
from ..layers import Conv2D, Linear
from .base import Model


class CNN(Model):
    """``conv(k x k, channels[0], 'same') - ReLU - maxpool(2) - conv(k x k, channels[1], 'same')
    - ReLU - maxpool(2) - ... - linear(hidden) - ReLU - linear(classes)`` on images of shape
    ``in_shape = (C, H, W)``: one convolution and 2x2 max pooling per entry of ``channels``
    (the defaults are the classic MNIST network: 5x5 kernels, 32 then 64 channels, 512
    hidden units). Each pooling halves the height and width (rounding down), so images must
    keep at least 1x1 after them (8x8 and larger for the default two).

    ReLU is computed after each pooling, on a quarter of the elements: max pooling and ReLU
    commute, in values and in gradients."""

    def __init__(self, in_shape: Sequence[int], out_size: int, backend: Backend,
                 channels: Sequence[int] = (32, 64), ksize: int = 5, hidden: int = 512,
                 task: str = "classification", dtype="float32"):
        check(len(in_shape) == 3, f"model=cnn needs images (C, H, W); the data's examples have "
              f"shape {tuple(in_shape)}: choose model=mlp")
        c, h, w = in_shape
        check(h >> len(channels) >= 1 and w >> len(channels) >= 1,
              f"model=cnn: {len(channels)} poolings need images of at least {2 ** len(channels)}x"
              f"{2 ** len(channels)}, got {h}x{w}; use fewer channels entries")
        self.task = task
        self._depth = len(channels)
        for i, out in enumerate(channels, start=1):
            setattr(self, f"conv{i}", Conv2D(c, out, ksize, backend, pad="same", dtype=dtype))
            c, h, w = out, h // 2, w // 2
        self.fc1 = Linear(c * h * w, hidden, backend, dtype)
        self.fc2 = Linear(hidden, out_size, backend, dtype)

    def forward(self, x):
        for i in range(1, self._depth + 1):
            x = F.relu(F.max_pooling_2d(getattr(self, f"conv{i}")(x), 2))
        return self.fc2(F.relu(self.fc1(F.flatten(x))))
