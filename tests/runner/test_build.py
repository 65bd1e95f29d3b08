"""runner/build.py, in-process: the parts :func:`build_run` and :func:`build_updater` build from a
composed config hold the config's values (the batch and the iterations it makes, the random
streams split from ``seed``, the optimizer's hyperparameters and its schedule, the backend),
and a bad value is one ConfigError naming the key. The ranges of each option's values are
tests/compose/test_schema.py's."""

from __future__ import annotations

import copy
import functools
import math

import numpy
import pytest
from helpers import make_synthetic
from omegaconf import OmegaConf

from trainer_run.callbacks import HOOKS, Callbacks
from trainer_run.compose import composer
from trainer_run.data.datasets import take
from trainer_run.errors import ConfigError
from trainer_run.loss_scaling import LossScaler
from trainer_run.optimizers import SGD
from trainer_run.runner import build
from trainer_run.schedulers import CosineScheduler
from trainer_run.updaters import StandardUpdater
from trainer_run.updaters.batches import Batches
from trainer_run.updaters.sync import Sync
from trainer_run.updaters.verdict import Verdict

SMALL = ("dataset.size=200", "dataset.batch_size=16", "trainer.max_epochs=2")
"""200 spirals, 40 held out: 160 training examples, 10 batches of 16 an epoch, 20 in the run."""


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple) -> dict:
    cfg = composer.compose(list(overrides), [], "unused")
    return OmegaConf.to_container(composer.task(cfg), resolve=True)


def config(*overrides: str) -> dict:
    """The resolved config of a run of :data:`SMALL` and ``overrides``, as the command builds it."""
    return copy.deepcopy(_composed((*SMALL, *overrides)))


def _refused(function, *arguments) -> str:
    with pytest.raises(ConfigError) as info:
        function(*arguments)
    return str(info.value)


def _arrays(dataset) -> tuple:
    return take(dataset, numpy.arange(len(dataset)))


# -- build_run ----------------------------------------------------------------------------------
def test_the_run_holds_the_batch_the_data_and_the_iterations_of_the_config():
    run = build.build_run(config())
    assert (run.batch_size, run.iterator.batch_size, run.samples) == (16, 16, 16)
    assert (len(run.data.train), len(run.data.val)) == (160, 40)
    assert run.total == 20  # 2 epochs of 160 / 16 updates
    assert (run.kvstore, run.asynchronous, run.max_time, run.augmentation, run.threads) == (
        None, False, None, None, 0)  # one replica in one process: no kvstore (MXNet's rule)
    assert (run.backend.name, run.backend.device, str(run.backend.dtype)) == ("numpy", None, "float32")
    assert str(build.build_run(config("precision=fp16")).backend.dtype) == "float16"


def test_accumulated_batches_count_in_the_examples_per_update_and_a_run_with_no_limit_makes_1000():
    run = build.build_run(config("updater.accum_grad=2", "trainer.max_epochs=3"))
    assert (run.batch_size, run.samples, run.total) == (16, 32, 15)  # 3 * 160 / 32
    run = build.build_run(config("trainer.max_epochs=null", "trainer.max_iterations=null"))
    assert run.total == build.DEFAULT_ITERATIONS == 1000


def test_the_data_comes_from_the_first_stream_split_from_the_seed_and_the_model_from_another():
    run = build.build_run(config("seed=7"))
    stream = numpy.random.SeedSequence(7).spawn(4)[0]
    expected = make_synthetic("spirals", 200, 0.2, numpy.random.default_rng(stream), noise=0.2,
                              turns=1.5)
    for got, want in [(run.data.train, expected.train), (run.data.val, expected.val)]:
        assert all(numpy.array_equal(g, w) for g, w in zip(_arrays(got), _arrays(want), strict=True))
    other_model = build.build_run(config("seed=7", "model.hidden_sizes=[8]"))
    assert all(numpy.array_equal(g, w) for g, w in zip(_arrays(other_model.data.train),
                                                      _arrays(run.data.train), strict=True))
    weights = {k: p.data.copy() for k, p in run.model.params().items()}
    other_data = build.build_run(config("seed=7", "dataset.noise=0.5"))
    assert other_data.model.params().keys() == weights.keys()
    assert all(numpy.array_equal(other_data.model.params()[k].data, w) for k, w in weights.items())
    other_seed = build.build_run(config("seed=8"))
    assert not numpy.array_equal(other_seed.model.params()["l1/W"].data, weights["l1/W"])


def test_the_optimizer_has_the_configs_hyperparameters_and_its_schedule_the_runs_length():
    run = build.build_run(config("optimizer=sgd", "optimizer.learning_rate=0.05",
                                 "optimizer.momentum=0.9", "optimizer.wd=1e-4", "scheduler=cosine",
                                 "scheduler.final_lr=0.001"))
    optimizer, schedule = run.optimizer, run.optimizer.lr_scheduler
    assert type(optimizer) is SGD and (optimizer.momentum, optimizer.wd) == (0.9, 1e-4)
    assert optimizer.lr is None  # the schedule owns the rate
    assert type(schedule) is CosineScheduler
    assert (schedule.max_update, schedule.base_lr, schedule.final_lr) == (20, 0.05, 0.001)
    for update in (0, 5, 20):
        optimizer.num_update = update
        hand = 0.001 + (0.05 - 0.001) * (1 + math.cos(math.pi * update / 20)) / 2
        assert optimizer.learning_rate == pytest.approx(hand, rel=1e-12)


def test_a_warmup_rises_linearly_to_the_rate_and_a_constant_schedule_keeps_it():
    run = build.build_run(config("optimizer.learning_rate=0.02", "scheduler.warmup_steps=4",
                                 "scheduler.warmup_begin_lr=0.004"))
    optimizer = run.optimizer
    rates = []
    for update in (0, 2, 4, 19):
        optimizer.num_update = update
        rates.append(optimizer.learning_rate)
    assert rates == pytest.approx([0.004, 0.004 + (0.02 - 0.004) * 2 / 4, 0.02, 0.02], rel=1e-12)


@pytest.mark.parametrize("overrides, line", [
    (("dataset.batch_size=161",), "dataset.batch_size=161 exceeds the 160 training examples"),
    (("dataset.overfit_batches=11",), "dataset.overfit_batches=11 takes 11 batches of 16 "
     "examples; the training split has 160: lower it or dataset.batch_size"),
    (("updater=parallel", "kvstore=none"), "updater=parallel sums gradients through a kvstore; "
     "kvstore=none cannot, choose kvstore=local or kvstore=device"),
    (("kvstore.compression.type=2bit",), "kvstore.compression.type=2bit compresses the gradients "
     "a kvstore sums, and this run has none: one replica in one process uses no kvstore (MXNet's "
     "rule); choose updater=parallel with updater.devices >= 2 and kvstore=device, a dist kvstore "
     "under mpiexec, or kvstore.compression.type=null"),
    (("seed=-1",), "seed must be >= 0, got -1"),
])
def test_a_bad_value_is_one_error_naming_its_key(overrides, line):
    assert _refused(build.build_run, config(*overrides)) == line


def test_an_overfit_run_draws_the_first_batches_of_the_training_split_in_order():
    whole = _arrays(build.build_run(config()).data.train)
    run = build.build_run(config("dataset.overfit_batches=2"))
    assert len(run.data.train) == len(run.data.val) == 32 and run.total == 4  # 2 epochs of 2
    for epoch in range(2):
        drawn = run.iterator.next() + run.iterator.next()
        assert numpy.array_equal(numpy.stack([x for x, _ in drawn]), whole[0][:32]), epoch
        assert numpy.array_equal(numpy.array([y for _, y in drawn]), whole[1][:32]), epoch


def wide(size, rng, noise, turns):
    """A user's data set (taking the keys of spirals' section) whose first input is 1e5, beyond
    float16's range."""
    x = numpy.stack([numpy.full(size, 1e5), rng.normal(size=size)], axis=1)
    return x, (x[:, 1] > 0).astype(numpy.int64)


def test_the_inputs_are_read_in_the_compute_dtype():
    chosen = f"dataset._target_={__name__}.wide"
    assert len(build.build_run(config(chosen)).data.train) == 160
    line = _refused(build.build_run, config(chosen, "precision=fp16"))
    assert "the inputs hold values beyond the range of float16, which the run reads them in " \
           "(largest 6.55e+04; first at example 0)" in line


# -- build_updater ------------------------------------------------------------------------------
class OwnUpdater(StandardUpdater):
    """A user's updater (``updater._target_``): its own key, and the parts the run built."""

    def __init__(self, iterator, optimizer, model, *, note: str = "none", **parts):
        super().__init__(iterator, optimizer, model, **parts)
        self.note, self.received = note, {"iterator": iterator, "optimizer": optimizer, **parts}


def test_a_users_updater_receives_the_built_parts_and_its_own_key():
    cfg = config(f"updater._target_={__name__}.OwnUpdater", "+updater.note=mine",
                 "updater.accum_grad=2", "updater.nan_policy=skip", "updater.max_skipped_in_a_row=7",
                 "updater.clip_global_norm=1.5", "loss_scale=static", "loss_scale.scale=128")
    run = build.build_run(cfg)
    updater = build.build_updater(run, cfg)
    assert type(updater) is OwnUpdater and updater.note == "mine"
    got = updater.received
    assert sorted(got) == ["batches", "callbacks", "iterator", "optimizer", "profiler", "sync",
                           "verdict"]
    assert got["iterator"] is run.iterator and got["optimizer"] is run.optimizer
    assert updater.get_model() is run.model
    assert type(got["batches"]) is Batches and (got["batches"].accum_grad, got["batches"].prefetch,
                                                got["batches"].workers) == (2, 0, 0)
    assert got["batches"].backend is run.backend
    assert type(got["verdict"]) is Verdict
    assert (got["verdict"].nan.policy, got["verdict"].nan.max_skipped_in_a_row) == ("skip", 7)
    assert got["verdict"].clip.max_norm == 1.5
    assert type(got["verdict"].loss_scaler) is LossScaler and got["verdict"].loss_scaler.scale == 128.0
    assert type(got["sync"]) is Sync and got["profiler"] is None
    assert type(got["callbacks"]) is Callbacks


def test_an_updater_with_more_replicas_than_examples_in_a_batch_is_refused():
    cfg = config("updater=parallel", "kvstore=local", "updater.devices=4", "dataset.batch_size=2")
    assert _refused(build.build_updater, build.build_run(cfg), cfg) == (
        "updater.devices=4 needs a batch of at least 4 examples; dataset.batch_size is 2")


def test_a_loss_scaler_is_built_from_its_section_and_none_takes_no_keys():
    scaler = build.build_loss_scaler({"_target_": "trainer_run.loss_scaling.LossScaler", "scale": 8})
    assert type(scaler) is LossScaler and scaler.scale == 8.0
    assert build.build_loss_scaler({"_target_": None}) is None
    assert _refused(build.build_loss_scaler, {"_target_": None, "scale": 2.0}) == (
        "loss_scale.scale is set, and loss_scale._target_ is null (no loss scaling); choose "
        "loss_scale=static or loss_scale=dynamic to scale")


def test_a_hook_is_a_dotted_name_or_a_target_and_anything_else_is_refused():
    RECORDED.clear()
    callbacks = build.build_callbacks({"forward_on_start": f"{__name__}.record",
                                       "update_on_finish": [f"{__name__}.record"],
                                       "comm_on_start": None})
    callbacks.fire("forward_on_start", 3)
    callbacks.fire("update_on_finish", 4)
    assert RECORDED == [3, 4]
    assert _refused(build.build_callbacks, {"on_nothing": None}) == (
        f"updater.callbacks.on_nothing is not a callback hook; choose one of {', '.join(HOOKS)}")
    assert _refused(build.build_callbacks, {"forward_on_start": {"x": 1}}) == (
        "updater.callbacks.forward_on_start must be a dotted name or a dict with _target_, got "
        "{'x': 1}")


RECORDED: list[int] = []


def record(iteration: int) -> None:
    """A hook of the user's: records the iteration it is called with."""
    RECORDED.append(iteration)
