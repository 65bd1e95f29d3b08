"""The built-in transforms (data/transforms.py) against per-example loops written here from
each method's definition (torchvision's RandomCrop and RandomErasing, Zhang et al.'s mixup,
Yun et al.'s CutMix), drawing from a generator seeded the same way in the documented order;
and the soft targets the mixing gives to the softmax cross entropy."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.autograd import backward
from trainer_run.data.transforms import CutMix, HorizontalFlip, Mixup, RandomCrop, RandomErasing
from trainer_run.errors import ConfigError
from trainer_run.functions import accuracy, softmax_cross_entropy
from trainer_run.params import Parameter


def images(n=6, shape=(3, 7, 9), seed=0):
    rng = numpy.random.default_rng(seed)
    x = rng.normal(size=(n, *shape)).astype(numpy.float32)
    return x, rng.integers(0, 4, size=n).astype(numpy.int32)


@pytest.mark.parametrize("shape, padding, size", [((3, 7, 9), 2, None), ((7, 9), 3, None),
                                                  ((2, 7, 9), 1, [5, 6]), ((1, 4, 4), 0, None)])
def test_random_crop_is_the_padded_image_sliced_at_offsets_drawn_per_example(shape, padding, size):
    x, t = images(shape=shape)
    out, t_out = RandomCrop(padding, size)((x, t), numpy.random.default_rng(3))
    h, w = shape[-2:]
    out_h, out_w = size or (h, w)
    rng = numpy.random.default_rng(3)
    top = rng.integers(0, h + 2 * padding - out_h + 1, size=len(x))
    left = rng.integers(0, w + 2 * padding - out_w + 1, size=len(x))
    for i in range(len(x)):
        pad = [(0, 0)] * (len(shape) - 2) + [(padding, padding)] * 2
        padded = numpy.pad(x[i], pad)
        numpy.testing.assert_array_equal(
            out[i], padded[..., top[i]:top[i] + out_h, left[i]:left[i] + out_w], strict=True)
    assert t_out is t


def test_random_crop_offsets_cover_every_place_and_the_padding_is_fill():
    x = numpy.ones((400, 1, 2, 2), numpy.float32)
    out = RandomCrop(1, fill=-1.0)((x, numpy.zeros(400, numpy.int32)), numpy.random.default_rng(0))[0]
    assert set(numpy.unique(out)) == {-1.0, 1.0}
    assert len({o.tobytes() for o in out}) == 9  # 3 x 3 offsets of a 2x2 window in a 4x4 image


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_horizontal_flip_mirrors_the_examples_whose_draw_is_below_p(p):
    x, t = images(n=50)
    out = HorizontalFlip(p)((x, t), numpy.random.default_rng(1))[0]
    flip = numpy.random.default_rng(1).random(50) < p
    for i in range(50):
        numpy.testing.assert_array_equal(out[i], x[i, :, :, ::-1] if flip[i] else x[i])
    assert flip.sum() == {0.0: 0, 1.0: 50}.get(p, flip.sum())


def erased_by_hand(x, rng, p, scale, ratio, value):
    """torchvision's RandomErasing per example, from the draws in the documented order."""
    n, (h, w) = len(x), x.shape[-2:]
    erase = rng.random(n) < p
    area = h * w * rng.uniform(*scale, size=(n, 10))
    aspect = numpy.exp(rng.uniform(numpy.log(ratio[0]), numpy.log(ratio[1]), size=(n, 10)))
    boxes = []
    for i in range(n):
        box = None
        for k in range(10):
            eh = int(round(float(numpy.sqrt(area[i, k] * aspect[i, k]))))
            ew = int(round(float(numpy.sqrt(area[i, k] / aspect[i, k]))))
            if eh < h and ew < w:
                box = (eh, ew)
                break
        boxes.append(box if erase[i] else None)
    heights = numpy.array([b[0] if b else 0 for b in boxes])
    widths = numpy.array([b[1] if b else 0 for b in boxes])
    top, left = rng.integers(0, h - heights + 1), rng.integers(0, w - widths + 1)
    out = x.copy()
    for i, box in enumerate(boxes):
        if box:
            out[i, ..., top[i]:top[i] + box[0], left[i]:left[i] + box[1]] = value
    return out


@pytest.mark.parametrize("p, scale, ratio", [(0.5, (0.02, 0.33), (0.3, 3.3)),
                                             (1.0, (0.5, 0.9), (0.5, 2.0)),
                                             (1.0, (0.95, 1.0), (1.0, 1.0))])
def test_random_erasing_erases_torchvisions_rectangle(p, scale, ratio):
    x, t = images(n=40, shape=(2, 10, 12))
    out = RandomErasing(p, scale, ratio, value=7.0)((x, t), numpy.random.default_rng(5))[0]
    reference = erased_by_hand(x, numpy.random.default_rng(5), p, scale, ratio, 7.0)
    numpy.testing.assert_array_equal(out, reference, strict=True)
    erased = (out == 7.0).reshape(40, -1).mean(axis=1)
    if p == 1.0 and scale[0] < 0.95:
        assert (erased <= scale[1] + 0.1).all() and (erased > 0).mean() > 0.5
    if scale[0] >= 0.95:  # a square of 95% or more of a 10x12 image never fits: nothing erased
        assert (erased == 0).all()


def test_mixup_mixes_inputs_and_one_hot_labels_by_one_beta_draw():
    x, t = images(n=8)
    out, soft = Mixup(alpha=0.4, classes=4)((x, t), numpy.random.default_rng(2))
    rng = numpy.random.default_rng(2)
    lam = rng.beta(0.4, 0.4)
    partner = rng.permutation(8)
    numpy.testing.assert_allclose(out, lam * x + (1 - lam) * x[partner], rtol=1e-6)
    expected = numpy.zeros((8, 4))
    expected[numpy.arange(8), t] += lam
    expected[numpy.arange(8), t[partner]] += 1 - lam
    numpy.testing.assert_allclose(soft, expected, rtol=1e-6)
    assert soft.dtype == numpy.float32 and out.dtype == numpy.float32


def test_cutmix_pastes_one_box_and_weights_labels_by_the_pixels_kept():
    x, t = images(n=5, shape=(1, 16, 16))
    x[:] += numpy.arange(5)[:, None, None, None] * 100  # every image's pixels its own
    out, soft = CutMix(alpha=1.0, classes=4)((x, t), numpy.random.default_rng(4))
    rng = numpy.random.default_rng(4)
    lam = rng.beta(1.0, 1.0)
    partner = rng.permutation(5)
    cut = int(16 * numpy.sqrt(1 - lam))
    cy, cx = rng.integers(16), rng.integers(16)
    y1, y2 = max(cy - cut // 2, 0), min(cy + cut // 2, 16)
    x1, x2 = max(cx - cut // 2, 0), min(cx + cut // 2, 16)
    for i in range(5):
        expected = x[i].copy()
        expected[:, y1:y2, x1:x2] = x[partner[i], :, y1:y2, x1:x2]
        numpy.testing.assert_array_equal(out[i], expected)
        kept = 1.0 if partner[i] == i else (out[i] == x[i]).mean()
        assert soft[i, t[i]] == pytest.approx(kept if t[partner[i]] != t[i] else 1.0, abs=1e-6)
    numpy.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)


def test_a_second_mixing_mixes_the_first_ones_probabilities():
    x, t = images(n=6)
    batch = Mixup(1.0, classes=4)((x, t), numpy.random.default_rng(0))
    out, soft = Mixup(1.0, classes=4)(batch, numpy.random.default_rng(1))
    numpy.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    rng = numpy.random.default_rng(1)
    lam, partner = rng.beta(1.0, 1.0), rng.permutation(6)
    numpy.testing.assert_allclose(soft, lam * batch[1] + (1 - lam) * batch[1][partner], rtol=1e-6)


@pytest.mark.parametrize("transform, message", [
    (RandomCrop(), "random_crop works on images"),
    (HorizontalFlip(), "horizontal_flip works on images"),
    (RandomErasing(), "random_erasing works on images"),
    (CutMix(classes=3), "cutmix works on images")])
def test_image_transforms_refuse_flat_examples_by_name(transform, message):
    flat = (numpy.zeros((4, 10), numpy.float32), numpy.zeros(4, numpy.int32))
    with pytest.raises(ConfigError, match=message):
        transform(flat, numpy.random.default_rng(0))


def test_mixing_refuses_a_regression_and_bad_arguments_name_the_key():
    with pytest.raises(ConfigError, match="mixup mixes the labels of a classification, and this "
                       "run's task is regression"):
        Mixup(classes=1, task="regression")
    for make, key in ((lambda: Mixup(alpha=0), "mixup.alpha must be > 0"),
                      (lambda: RandomCrop(padding=-1), "random_crop.padding must be >= 0"),
                      (lambda: HorizontalFlip(p=2), "horizontal_flip.p must be <= 1"),
                      (lambda: RandomErasing(scale=(0.5, 0.1)), "random_erasing.scale must be"),
                      (lambda: RandomCrop(size=[1, 2, 3]), "random_crop.size must be")):
        with pytest.raises(ConfigError, match=key):
            make()


def log_softmax(x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))


def test_soft_targets_give_the_cross_entropy_with_the_probabilities_and_its_gradient():
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(5, 4))
    soft = rng.dirichlet(numpy.ones(4), size=5)
    v = Parameter(x.copy())
    loss = softmax_cross_entropy(v, soft)
    assert float(loss.data) == pytest.approx(-(soft * log_softmax(x)).sum(axis=1).mean(), rel=1e-12)
    backward(loss)
    numeric = numpy.zeros_like(x)
    for index in numpy.ndindex(x.shape):
        d = numpy.zeros_like(x)
        d[index] = 1e-6
        numeric[index] = (-(soft * log_softmax(x + d)).sum(axis=1).mean()
                          + (soft * log_softmax(x - d)).sum(axis=1).mean()) / 2e-6
    numpy.testing.assert_allclose(v.grad, numeric, rtol=1e-5, atol=1e-9)


def test_one_hot_soft_targets_equal_class_ids_and_accuracy_reads_the_largest():
    rng = numpy.random.default_rng(1)
    x = rng.normal(size=(6, 3)).astype(numpy.float32)
    t = rng.integers(0, 3, size=6).astype(numpy.int32)
    one_hot = numpy.eye(3, dtype=numpy.float32)[t]
    hard, soft = Parameter(x.copy()), Parameter(x.copy())
    a, b = softmax_cross_entropy(hard, t), softmax_cross_entropy(soft, one_hot)
    assert float(a.data) == pytest.approx(float(b.data), rel=1e-6)
    backward(a)
    backward(b)
    numpy.testing.assert_allclose(hard.grad, soft.grad, rtol=1e-6, atol=1e-7)
    assert float(accuracy(x, t)) == float(accuracy(x, one_hot * 0.7 + 0.1))
