"""The built-in training-batch transforms of ``dataset.transforms`` (random augmentation).

A transform is called with a batch, the tuple of arrays ``(x, ..., t)`` the dataset gives
(inputs first, labels last, already normalized by ``dataset.normalize``), and a
``numpy.random.Generator``; it returns the transformed batch. Every random choice is drawn from
that generator on the host, one draw per example where the choice is per example, and applied
to the arrays where they are: on a GPU when the batch is there (CuPy), in memory otherwise.
Which generator a batch gets is :mod:`.augmentation`'s rule.

Image transforms take inputs of at least two axes whose last two are height and width
(``(N, H, W)`` or ``(N, C, H, W)``). Mixup and CutMix are for classification: they mix each
example with another of the batch (a random permutation) and turn the labels into the mixed
one-hot probabilities, shape ``(N, classes)``, which the softmax cross entropy takes as soft
targets (Chainer 7's rule) and accuracy reads by their largest entry.
"""

from __future__ import annotations

import math

import numpy

from ..backend import array_module
from ..errors import ConfigError, check, check_number


def _images(x, name: str):
    if x.ndim < 3:
        raise ConfigError(f"dataset.transforms: {name} works on images, inputs whose last two "
                          f"axes are height and width; these examples have shape "
                          f"{tuple(x.shape[1:])}: leave {name} out for these data")
    return array_module(x)


def _on(xp, host_array):
    """``host_array`` on the device of the array module ``xp``."""
    return host_array if xp is numpy else xp.asarray(host_array)


class RandomCrop:
    """Pads each image by ``padding`` pixels of value ``fill`` on every side, then crops a
    window of ``size`` (``[height, width]``; null: the image's own) at an offset drawn
    uniformly per example (torchvision's ``RandomCrop(size, padding)``)."""

    def __init__(self, padding: int = 4, size=None, fill: float = 0.0):
        self.padding = check_number("random_crop.padding", padding, low=0, integer=True)
        self.size = None if size is None else tuple(
            check_number("random_crop.size", s, low=1, integer=True)
            for s in ([size, size] if isinstance(size, int) else size))
        check(self.size is None or len(self.size) == 2,
              f"random_crop.size must be an integer or [height, width], got {size!r}")
        self.fill = float(fill)

    def __call__(self, batch: tuple, rng: numpy.random.Generator) -> tuple:
        x, *rest = batch
        xp = _images(x, "random_crop")
        n, (h, w), p = len(x), x.shape[-2:], self.padding
        out_h, out_w = self.size or (h, w)
        check(out_h <= h + 2 * p and out_w <= w + 2 * p,
              f"dataset.transforms: random_crop.size {out_h}x{out_w} exceeds the padded image "
              f"{h + 2 * p}x{w + 2 * p}")
        top = rng.integers(0, h + 2 * p - out_h + 1, size=n)
        left = rng.integers(0, w + 2 * p - out_w + 1, size=n)
        images = x.reshape(n, -1, h, w)
        if p:
            images = xp.pad(images, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=self.fill)
        images = xp.ascontiguousarray(images)
        # every window of the padded images, as a view: (n, c, top, left, out_h, out_w)
        s0, s1, s2, s3 = images.strides
        windows = xp.lib.stride_tricks.as_strided(
            images, (n, images.shape[1], h + 2 * p - out_h + 1, w + 2 * p - out_w + 1, out_h, out_w),
            (s0, s1, s2, s3, s2, s3))
        crops = windows[_on(xp, numpy.arange(n)), :, _on(xp, top), _on(xp, left)]
        return (crops.reshape(x.shape[:-2] + (out_h, out_w)), *rest)


class HorizontalFlip:
    """Mirrors each image left to right with probability ``p``."""

    def __init__(self, p: float = 0.5):
        self.p = check_number("horizontal_flip.p", p, low=0.0, high=1.0)

    def __call__(self, batch: tuple, rng: numpy.random.Generator) -> tuple:
        x, *rest = batch
        xp = _images(x, "horizontal_flip")
        flip = _on(xp, rng.random(len(x)) < self.p).reshape((-1,) + (1,) * (x.ndim - 1))
        return (xp.where(flip, x[..., ::-1], x), *rest)


class RandomErasing:
    """Erases a rectangle of each image with probability ``p`` (Zhong et al.; torchvision's
    ``RandomErasing``): its area a share of the image drawn uniformly from ``scale``, its
    aspect ratio drawn log-uniformly from ``ratio``, its place uniformly where it fits, its
    pixels set to ``value``. Up to 10 draws of size are made per example; an example whose
    draws all fail to fit is left whole."""

    ATTEMPTS = 10

    def __init__(self, p: float = 0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value: float = 0.0):
        self.p = check_number("random_erasing.p", p, low=0.0, high=1.0)
        self.scale, self.ratio = _range("random_erasing.scale", scale), _range("random_erasing.ratio", ratio)
        check(0 <= self.scale[0] and self.scale[1] <= 1 and self.ratio[0] > 0,
              f"random_erasing: scale must lie in [0, 1] and ratio be positive, got "
              f"scale={list(self.scale)}, ratio={list(self.ratio)}")
        self.value = float(value)

    def __call__(self, batch: tuple, rng: numpy.random.Generator) -> tuple:
        x, *rest = batch
        xp = _images(x, "random_erasing")
        n, (h, w) = len(x), x.shape[-2:]
        erase = rng.random(n) < self.p
        area = h * w * rng.uniform(*self.scale, size=(n, self.ATTEMPTS))
        aspect = numpy.exp(rng.uniform(*numpy.log(self.ratio), size=(n, self.ATTEMPTS)))
        height = numpy.rint(numpy.sqrt(area * aspect)).astype(numpy.int64)
        width = numpy.rint(numpy.sqrt(area / aspect)).astype(numpy.int64)
        fits = (height < h) & (width < w)
        first = fits.argmax(axis=1)
        rows = numpy.arange(n)
        erase &= fits[rows, first]
        height, width = numpy.where(erase, height[rows, first], 0), numpy.where(erase, width[rows, first], 0)
        top = rng.integers(0, h - height + 1)
        left = rng.integers(0, w - width + 1)
        inside_rows = (numpy.arange(h) >= top[:, None]) & (numpy.arange(h) < (top + height)[:, None])
        inside_cols = (numpy.arange(w) >= left[:, None]) & (numpy.arange(w) < (left + width)[:, None])
        mask = _on(xp, inside_rows[:, None, :, None] & inside_cols[:, None, None, :])
        images = x.reshape(n, -1, h, w)
        return (xp.where(mask, x.dtype.type(self.value), images).reshape(x.shape), *rest)


def _range(name: str, value) -> tuple:
    low, high = (float(v) for v in value) if len(value) == 2 else (None, None)
    check(low is not None and low <= high, f"{name} must be [low, high] with low <= high, got {value!r}")
    return low, high


class _Mixing:
    """What Mixup and CutMix share: the mixing weight ``lam`` drawn from Beta(alpha, alpha),
    the partner of each example (a random permutation of the batch), the mixed labels."""

    name = ""

    def __init__(self, alpha: float, classes: int, task: str = "classification"):
        self.alpha = check_number(f"{self.name}.alpha", alpha, low=0.0, low_open=True)
        check(task == "classification", f"dataset.transforms: {self.name} mixes the labels of a "
              f"classification, and this run's task is {task}: leave {self.name} out")
        self.classes = classes

    def __call__(self, batch: tuple, rng: numpy.random.Generator) -> tuple:
        x, *middle, t = batch
        lam = float(rng.beta(self.alpha, self.alpha))
        partner = rng.permutation(len(x))
        xp = array_module(x)
        x = x if x.dtype.kind == "f" else x.astype(numpy.float32)
        x, lam = self.mixed(x, x[_on(xp, partner)], lam, rng)
        soft = self.probabilities(t)
        t = soft * soft.dtype.type(lam) + soft[_on(xp, partner)] * soft.dtype.type(1 - lam)
        return (x, *middle, t)

    def probabilities(self, t):
        """``t`` as class probabilities ``(N, classes)``: one-hot for class ids, unchanged when
        already probabilities (an earlier mixing's)."""
        xp = array_module(t)
        if t.ndim == 2 and t.dtype.kind == "f":
            return t
        check(t.ndim == 1 and t.dtype.kind in "iu", f"dataset.transforms: {self.name} needs class "
              f"ids (N,) as the labels, got {t.dtype} of shape {tuple(t.shape)}")
        return (t[:, None] == xp.arange(self.classes)).astype(numpy.float32)

    def mixed(self, x, other, lam: float, rng) -> tuple:
        raise NotImplementedError


class Mixup(_Mixing):
    """Mixup (Zhang et al., 2018): ``lam * x + (1 - lam) * x[partner]`` and the labels mixed
    in the same proportion, ``lam`` drawn once per batch from Beta(``alpha``, ``alpha``)."""

    name = "mixup"

    def __init__(self, alpha: float = 0.2, classes: int = 0, task: str = "classification"):
        super().__init__(alpha, classes, task)

    def mixed(self, x, other, lam: float, rng) -> tuple:
        return x * x.dtype.type(lam) + other * x.dtype.type(1 - lam), lam


class CutMix(_Mixing):
    """CutMix (Yun et al., 2019; its authors' code): a box of the partner's image pasted into
    each image, the same box for the whole batch, of sides ``sqrt(1 - lam)`` times the image's
    (truncated) centred at a uniform pixel and clipped to the image; the labels mixed by the
    share of pixels each image keeps."""

    name = "cutmix"

    def __init__(self, alpha: float = 1.0, classes: int = 0, task: str = "classification"):
        super().__init__(alpha, classes, task)

    def mixed(self, x, other, lam: float, rng) -> tuple:
        _images(x, self.name)
        h, w = x.shape[-2:]
        cut = math.sqrt(1.0 - lam)
        cut_h, cut_w = int(h * cut), int(w * cut)
        cy, cx = int(rng.integers(h)), int(rng.integers(w))
        y1, y2 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, h)
        x1, x2 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, w)
        x = x.copy()
        x[..., y1:y2, x1:x2] = other[..., y1:y2, x1:x2]
        return x, 1.0 - (y2 - y1) * (x2 - x1) / (h * w)



BUILT_IN = {
    "random_crop": RandomCrop,
    "horizontal_flip": HorizontalFlip,
    "random_erasing": RandomErasing,
    "mixup": Mixup,
    "cutmix": CutMix,
}
"""The built-in transforms of ``dataset.transforms`` by name: ``dataset.transforms=[random_crop,
horizontal_flip]``. Each name stands for its class with the class's defaults (docs/data.md,
"Augmentation"): ``random_crop`` pads 4 pixels of zeros on every side and crops the image's size
at a random offset; ``horizontal_flip`` mirrors left to right with probability 0.5;
``random_erasing`` erases a random rectangle (2% to 33% of the image) with probability 0.5;
``mixup`` mixes each example and its label with another's, weight ~ Beta(0.2, 0.2); ``cutmix``
pastes a box of another example, labels mixed by area, ~ Beta(1, 1). To change an argument, give
the mapping: ``'dataset.transforms=[{_target_: trainer_run.data.transforms.RandomCrop,
padding: 2}]'``."""
