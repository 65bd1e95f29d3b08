"""A small pre-activation residual network for images (``model=resnet``)."""

from __future__ import annotations

from typing import Sequence

from .. import functions as F
from ..backend import Backend
from ..errors import check
from ..layers import BatchNorm, Conv2D, Linear
from ..module import Module
from .base import Model


class PreActBlock(Module):
    """``x + conv(relu(bn(conv(relu(bn(x))))))`` (He et al. 2016, "Identity Mappings"); with
    ``stride`` 2 or a change of width the shortcut is a 1x1 convolution of ``relu(bn(x))``."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, backend: Backend, dtype):
        self.bn1 = BatchNorm(in_channels, backend, dtype=dtype)
        self.conv1 = Conv2D(in_channels, out_channels, 3, backend, stride=stride, pad=1, bias=False,
                            dtype=dtype)
        self.bn2 = BatchNorm(out_channels, backend, dtype=dtype)
        self.conv2 = Conv2D(out_channels, out_channels, 3, backend, pad=1, bias=False, dtype=dtype)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = Conv2D(in_channels, out_channels, 1, backend, stride=stride, bias=False,
                                   dtype=dtype)

    def __call__(self, x):
        h = F.relu(self.bn1(x))
        skip = x if self.shortcut is None else self.shortcut(h)
        h = self.conv1(h)
        return self.conv2(F.relu(self.bn2(h))) + skip


class ResNet(Model):
    """A pre-activation ResNet of ``depth = 6 n + 2`` layers: a 3x3 convolution of ``width``
    channels, three stages of ``n`` blocks (:class:`PreActBlock`) of ``width``, ``2 width``
    and ``4 width`` channels (the second and third start with stride 2), batch norm, ReLU,
    global average pooling and a linear layer (He et al.'s CIFAR networks; ``depth=20,
    width=16`` is their ResNet-20). Images ``(C, H, W)`` of 28x28 to 32x32 suit it."""

    def __init__(self, in_shape: Sequence[int], out_size: int, backend: Backend, depth: int = 8,
                 width: int = 16, task: str = "classification", dtype="float32"):
        check(len(in_shape) == 3, f"model=resnet needs images (C, H, W); the data's examples have "
              f"shape {tuple(in_shape)}: choose model=mlp")
        check(depth >= 8 and (depth - 2) % 6 == 0, f"model=resnet: depth must be 6 n + 2 (8, 14, "
              f"20, ...), got {depth}")
        self.task = task
        blocks = (depth - 2) // 6
        self.conv = Conv2D(in_shape[0], width, 3, backend, pad=1, bias=False, dtype=dtype)
        channels, self._blocks = width, []
        for stage, out in enumerate((width, 2 * width, 4 * width)):
            for b in range(blocks):
                stride = 2 if stage > 0 and b == 0 else 1
                name = f"block{stage + 1}_{b + 1}"
                setattr(self, name, PreActBlock(channels, out, stride, backend, dtype))
                self._blocks.append(name)
                channels = out
        self.bn = BatchNorm(channels, backend, dtype=dtype)
        self.fc = Linear(channels, out_size, backend, dtype)

    def forward(self, x):
        h = self.conv(x)
        for name in self._blocks:
            h = getattr(self, name)(h)
        return self.fc(F.global_average_pooling_2d(F.relu(self.bn(h))))
