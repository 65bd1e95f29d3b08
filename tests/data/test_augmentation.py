"""``dataset.transforms`` in training (data/augmentation.py, updaters/batches.py): each part of
each training batch is transformed with a generator spawned from the run's seed and the
batch's key, so gathering ahead, loading a state mid-run and resuming a run transform every
batch as a plain run does; names and user transforms are checked before training (whole
runs from the command line: tests/command/test_transform_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.compose.options import CONFIGS
from trainer_run.data import ArrayDataset, SerialIterator, transforms
from trainer_run.data.augmentation import Augmentation, batch_key, build
from trainer_run.data.transforms import BUILT_IN, CutMix, HorizontalFlip, Mixup, RandomCrop, RandomErasing
from trainer_run.errors import ConfigError
from trainer_run.models import MLP
from trainer_run.runs import trust
from trainer_run.updaters import ParallelUpdater, StandardUpdater, updater_of

SEED = np.random.SeedSequence(11).spawn(4)[3]


def images(n=90):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 1, 4, 4)).astype(np.float32)
    return ArrayDataset(x, rng.integers(0, 3, size=n).astype(np.int32))


def augmentation():
    return Augmentation([RandomCrop(1), HorizontalFlip(), Mixup(0.5, classes=3)], SEED)


def updater(prefetch=0, replicas=1, rank_data=None, workers=0):
    backend = get_backend("numpy", seed=3)
    model = MLP(16, 3, backend, hidden_sizes=[8])
    iterator = SerialIterator(rank_data or images(), 12, rng=np.random.default_rng(5))
    common = dict(backend=backend, prefetch=prefetch, transforms=augmentation(), workers=workers)
    if replicas == 1:
        return updater_of(StandardUpdater, iterator, optimizers.create("sgd", learning_rate=0.1),
                          model, **common)
    return updater_of(ParallelUpdater, iterator, optimizers.create("sgd", learning_rate=0.1), model,
                      devices=replicas, kvstore=kvstores.create("local"), **common)


@pytest.mark.parametrize("replicas", [1, 2])
def test_each_part_is_transformed_with_the_generator_of_its_seed_rank_batch_and_replica(replicas):
    """The reference draws by hand: SeedSequence(seed, spawn_key=(3, rank, epoch, position,
    part)), the transforms called in order on the part's rows."""
    target, data = updater(replicas=replicas), images()
    shadow = SerialIterator(data, 12, rng=np.random.default_rng(5))
    for _ in range(20):  # 90 examples in 12s: batches cross epoch boundaries
        epoch, position = shadow.epoch, shadow.current_position
        indices = shadow.next_indices()
        parts, size = target.next_parts(target.get_iterator("main"), [None] * replicas)
        assert size == 12
        for j, part in enumerate(parts):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
                11, spawn_key=(3, 0, epoch, position, j))))
            batch = data.take(indices[j::replicas])
            for transform in (RandomCrop(1), HorizontalFlip(), Mixup(0.5, classes=3)):
                batch = transform(batch, rng)
            for got, expected in zip(part, batch):
                np.testing.assert_array_equal(got, expected, strict=True)
    target.finalize()


def test_workers_draw_apart_and_keys_name_batches_once():
    a, b = augmentation(), augmentation().for_worker(1)
    draws = {tuple(a.generator((e, p, 0)).random(2)) for e in range(3) for p in range(0, 90, 12)}
    assert len(draws) == 24
    assert a.generator((0, 12, 0)).random() != b.generator((0, 12, 0)).random()
    it = SerialIterator(images(), 12, rng=np.random.default_rng(0))
    keys = []
    for _ in range(40):
        keys.append(batch_key(it))
        it.next_indices()
    assert len(set(keys)) == 40


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("prefetch, workers", [(3, 0), (0, 3), (1, 2)])
def test_gathering_ahead_in_threads_transforms_the_same_batches(replicas, prefetch, workers):
    plain, ahead = updater(0, replicas), updater(prefetch, replicas, workers=workers)
    try:
        for _ in range(25):
            parts, _ = plain.next_parts(plain.get_iterator("main"), [None] * replicas)
            got, _ = ahead.next_parts(ahead.get_iterator("main"), [None] * replicas)
            for a, b in zip(got, parts):
                for x, y in zip(a, b):
                    np.testing.assert_array_equal(x, y, strict=True)
    finally:
        ahead.finalize()


@pytest.mark.parametrize("prefetch, workers", [(2, 0), (0, 2)])
def test_a_state_loaded_mid_run_continues_with_the_same_transforms(prefetch, workers):
    target = updater(prefetch, workers=workers)
    try:
        for _ in range(5):
            target.update()
        state = target.state_dict()
        for _ in range(10):
            target.update()
        expected = {k: p.data.copy() for k, p in target.get_model().params().items()}
        target.load_state_dict(state)
        for _ in range(10):
            target.update()
    finally:
        target.finalize()
    for key, value in target.get_model().params().items():
        np.testing.assert_array_equal(value.data, expected[key], err_msg=key, strict=True)


NAMES = "random_crop, horizontal_flip, random_erasing, mixup, cutmix"


def test_entries_are_names_or_targets_and_bad_ones_are_named():
    built = build(["random_crop", {"_target_": "trainer_run.data.transforms.RandomCrop",
                                   "padding": 2}], SEED, {"classes": 3, "task": "classification"})
    assert [t.padding for t in built.transforms] == [4, 2]
    assert build([], SEED, {}) is None
    with pytest.raises(ConfigError) as refused:
        build(["random_crop", "flip"], SEED, {})
    assert str(refused.value) == (f"dataset.transforms[1]='flip' is not a built-in transform; "
                                  f"choose one of {NAMES}, or give a mapping with _target_")
    with pytest.raises(ConfigError) as refused:
        build(["random_crp"], SEED, {})
    assert str(refused.value) == (f"dataset.transforms[0]='random_crp' is not a built-in "
                                  f"transform; did you mean random_crop? choose one of {NAMES}, "
                                  "or give a mapping with _target_")
    with pytest.raises(ConfigError) as refused:
        build([{"padding": 2}], SEED, {})
    assert str(refused.value) == (f"dataset.transforms[0] must be a built-in transform's name "
                                  f"({NAMES}) or a mapping with _target_, got {{'padding': 2}}")
    with pytest.raises(ConfigError, match="dataset.transforms must be a list"):
        build("random_crop", SEED, {})


def test_the_built_in_names_are_the_classes_of_trainer_run_data_transforms_in_code():
    assert list(BUILT_IN.items()) == [("random_crop", RandomCrop), ("horizontal_flip", HorizontalFlip),
                                      ("random_erasing", RandomErasing), ("mixup", Mixup),
                                      ("cutmix", CutMix)]
    assert not (CONFIGS / "_transforms.yaml").exists()
    assert {f"trainer_run.data.transforms.{c.__name__}" for c in BUILT_IN.values()} <= \
        trust.builtin_targets()


@pytest.mark.parametrize("name, klass", [("random_crop", "RandomCrop"),
                                         ("horizontal_flip", "HorizontalFlip"),
                                         ("random_erasing", "RandomErasing"), ("mixup", "Mixup"),
                                         ("cutmix", "CutMix")])
def test_a_name_transforms_as_its_explicit_target_and_its_class_with_defaults(name, klass):
    standard = {"classes": 4, "task": "classification"}
    rng = np.random.default_rng(2)
    batch = (rng.normal(size=(8, 3, 6, 6)).astype(np.float32),
             rng.integers(0, 4, size=8).astype(np.int32))
    by_name = build([name], SEED, standard)
    explicit = build([{"_target_": f"trainer_run.data.transforms.{klass}"}], SEED, standard)
    child = np.random.SeedSequence(SEED.entropy, spawn_key=(*SEED.spawn_key, 0, 1, 16, 0))
    factory = getattr(transforms, klass)
    direct = factory(**standard) if name in ("mixup", "cutmix") else factory()  # the defaults
    by_hand = direct(batch, np.random.Generator(np.random.PCG64(child)))
    assert type(by_name.transforms[0]) is factory
    for got, same, expected in zip(by_name(batch, (1, 16, 0)), explicit(batch, (1, 16, 0)), by_hand):
        np.testing.assert_array_equal(got, same, strict=True)
        np.testing.assert_array_equal(got, expected, strict=True)
    assert any(not np.array_equal(a, b) for a, b in zip(by_name(batch, (1, 16, 0)), batch))


class Shift:
    """A user's transform: adds its constant."""

    def __init__(self, by: float):
        self.by = by

    def __call__(self, batch, rng):
        x, t = batch
        if self.by < 0:
            raise ValueError("no negative shifts")
        return x + self.by, t


def test_a_users_transform_runs_and_what_it_raises_names_its_entry():
    shift = build([{"_target_": f"{__name__}.Shift", "by": 2.0}], SEED, {})
    x = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(shift((x, np.zeros(2)), (0, 0, 0))[0], x + 2)
    broken = build([{"_target_": f"{__name__}.Shift", "by": -1.0}], SEED, {})
    with pytest.raises(Exception, match=r"dataset.transforms\[0\].*raised ValueError: no negative"):
        broken.try_on((x, np.zeros(2)))


NOISE = '''
def noise(batch, rng, sigma):
    x, *rest = batch
    return (x + sigma * rng.normal(size=x.shape).astype(x.dtype), *rest)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``my_transforms.noise(batch, rng, sigma)``, importable as a user's module in its folder."""
    (tmp_path / "my_transforms.py").write_text(NOISE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    import sys
    sys.modules.pop("my_transforms", None)


def test_a_plain_function_is_a_transform_its_extra_keys_bound_as_keyword_arguments(user_module):
    built = build([{"_target_": "my_transforms.noise", "sigma": 0.1}], SEED,
                  {"classes": 3, "task": "classification"})
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = np.array([0, 1, 2])
    out_x, out_t = built((x, t), (2, 24, 0))
    child = np.random.SeedSequence(SEED.entropy, spawn_key=(*SEED.spawn_key, 0, 2, 24, 0))
    expected = x + 0.1 * np.random.Generator(np.random.PCG64(child)).normal(size=(3, 4)).astype(
        np.float32)
    np.testing.assert_array_equal(out_x, expected, strict=True)
    np.testing.assert_array_equal(out_t, t)
    with pytest.raises(ConfigError) as refused:
        build([{"_target_": "my_transforms.noise"}], SEED, {})
    assert str(refused.value) == (
        "dataset.transforms[0]: noise(batch, rng, sigma) cannot be called with (batch, rng): "
        "missing a required argument: 'sigma'; a transform takes the batch and the generator, "
        "then the entry's other keys")
