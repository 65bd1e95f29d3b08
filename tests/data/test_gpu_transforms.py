"""The built-in transforms on CuPy: with the same generator, a batch on the GPU is transformed
into NumPy's batch exactly (every draw is made on the host; the GPU only moves and mixes
values), and the whole augmentation of a part equals the host's."""

from __future__ import annotations

import numpy
import pytest
from gpu_helpers import backend, host

from trainer_run.data.augmentation import Augmentation
from trainer_run.data.transforms import CutMix, HorizontalFlip, Mixup, RandomCrop, RandomErasing

TRANSFORMS = {
    "random_crop": lambda: RandomCrop(2),
    "random_crop_size": lambda: RandomCrop(1, size=[5, 6], fill=-1.0),
    "horizontal_flip": lambda: HorizontalFlip(),
    "random_erasing": lambda: RandomErasing(p=1.0, value=3.0),
    "mixup": lambda: Mixup(0.4, classes=4),
    "cutmix": lambda: CutMix(1.0, classes=4),
}


def _batch():
    rng = numpy.random.default_rng(0)
    return (rng.normal(size=(9, 3, 8, 7)).astype(numpy.float32),
            rng.integers(0, 4, size=9).astype(numpy.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("name", TRANSFORMS)
def test_a_transform_on_the_gpu_gives_the_hosts_batch(name):
    gpu = backend("cupy")
    x, t = _batch()
    expected = TRANSFORMS[name]()((x, t), numpy.random.default_rng(7))
    with gpu.activate():
        got = TRANSFORMS[name]()((gpu.asarray(x), gpu.asarray(t)), numpy.random.default_rng(7))
    for a, b in zip(got, expected):
        numpy.testing.assert_array_equal(host(a), b, strict=True)


@pytest.mark.gpu
def test_an_augmentation_on_the_gpu_gives_the_hosts_part():
    gpu = backend("cupy")
    x, t = _batch()
    augment = Augmentation([RandomCrop(1), HorizontalFlip(), RandomErasing(), CutMix(classes=4)],
                           numpy.random.SeedSequence(3)).for_worker(1)
    expected = augment((x, t), (2, 40, 0))
    with gpu.activate():
        got = augment((gpu.asarray(x), gpu.asarray(t)), (2, 40, 0))
    for a, b in zip(got, expected):
        numpy.testing.assert_array_equal(host(a), b, strict=True)
