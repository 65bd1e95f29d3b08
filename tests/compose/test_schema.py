"""Validated configs (compose/schema.py): every field has a type, every numeric field a range,
and a bad value stops the command with one line before any training starts (the keys
themselves: test_override_keys.py)."""

from __future__ import annotations

import copy
import functools
import math
import re

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from trainer_run import optimizers
from trainer_run.compose import schema
from trainer_run.compose.options import PRESETS
from trainer_run.errors import ConfigError
from trainer_run.runner.build import build_optimizer, build_trainer

ALL_OPTIONS = [(group, option) for group in schema.GROUPS if group not in PRESETS
               for option in schema.OPTIONS[group] if schema.option_section(group, option)]


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple) -> dict:
    with initialize_config_dir(config_dir=str(schema.CONFIGS), version_base="1.3"):
        return OmegaConf.to_container(compose("config", overrides=list(overrides)), resolve=True)


def _config(overrides=(), values=None) -> dict:
    """The resolved config of ``overrides`` with the dotted ``values`` set in it, as overrides
    would set them (``scheduler.base_lr`` follows ``optimizer.learning_rate``, as the config's
    interpolation makes it)."""
    config = copy.deepcopy(_composed(tuple(overrides)))
    values = dict(values or {})
    if "optimizer.learning_rate" in values and "scheduler.base_lr" not in values:
        values["scheduler.base_lr"] = values["optimizer.learning_rate"]
    for key, value in values.items():
        node = config
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return config


def _leaves(section: dict, prefix: str):
    for name, value in section.items():
        if isinstance(value, dict) and value:  # an empty mapping (logger: {jsonl: {}}) is a field
            yield from _leaves(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def _refused(function, *args) -> str:
    with pytest.raises(ConfigError) as info:
        function(*args)
    return str(info.value)


# -- keys on the command line -------------------------------------------------------------------


# -- types ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("group, option", ALL_OPTIONS, ids=lambda v: v)
def test_every_default_config_of_every_option_passes(group, option):
    schema.check_types(_config([f"{group}={option}"]))


@pytest.mark.parametrize("overrides", [
    ["precision=fp16", "updater=parallel", "kvstore=local"],
    ["precision=fp32"],  # presets: no section of their own, they set backend.dtype
    ["precision=fp16"],
    ["optimizer=ftml", "scheduler=cosine", "scheduler.final_lr=1e-5"],
    ["~scheduler"],
], ids=lambda v: " ".join(v))
def test_combined_defaults_pass(overrides):
    schema.check_types(_config(overrides))
    dtype = "float16" if "precision=fp16" in overrides else "float32"
    assert _config(overrides)["backend"]["dtype"] == dtype


@pytest.mark.parametrize("group, option", ALL_OPTIONS, ids=lambda v: v)
def test_every_field_of_every_option_is_type_checked(group, option):
    config = _config([f"{group}={option}"])
    keys = list(_leaves(schema.option_section(group, option), f"{group}."))
    if group == "trainer":
        keys += ["seed", "resume", "trust"]
    assert keys
    for key in keys:
        message = _refused(schema.check_types, _config([f"{group}={option}"], {key: {1, 2}}))
        assert message.startswith(f"{key} must be "), message
    schema.check_types(config)


@pytest.mark.parametrize("overrides, key, value, message", [
    ((), "optimizer.learning_rate", "fast", "optimizer.learning_rate must be a number, got 'fast'"),
    ((), "optimizer.learning_rate", True, "optimizer.learning_rate must be a number, got True"),
    ((), "optimizer.beta1", math.inf, "optimizer.beta1 must be a finite number, got inf"),
    ((), "optimizer.epsilon", math.nan, "optimizer.epsilon must be a finite number, got nan"),
    ((), "optimizer.clip_gradient", "1", "optimizer.clip_gradient must be a number, got '1'"),
    ((), "optimizer.lazy_update", "no", "optimizer.lazy_update must be true or false, got 'no'"),
    ((), "trainer.log_interval", 2.5, "trainer.log_interval must be an integer number of "
                                      "iterations (200) or a number of epochs (1epoch, 0.5epoch), "
                                      "got 2.5"),
    ((), "trainer.log_interval", 1e12, "trainer.log_interval must be an integer number of "
                                       "iterations (200) or a number of epochs (1epoch, 0.5epoch), "
                                       "got 1000000000000.0"),
    ((), "trainer.checkpoint_interval", True,
     "trainer.checkpoint_interval must be an integer number of iterations (200) or a number of "
     "epochs (1epoch, 0.5epoch), got True"),
    ((), "trainer.max_iterations", "abc", "trainer.max_iterations must be an integer, got 'abc'"),
    ((), "trainer.max_epochs", "two", "trainer.max_epochs must be a number, got 'two'"),
    ((), "trainer.keep_checkpoints", 1.5, "trainer.keep_checkpoints must be an integer, got 1.5"),
    ((), "trainer.progress", "yes", "trainer.progress must be true or false, got 'yes'"),
    ((), "trainer.progress", 1, "trainer.progress must be true or false, got 1"),
    ((), "model.activation", 1, "model.activation must be a string, got 1"),
    ((), "model.hidden_sizes", 64, "model.hidden_sizes must be a list, got 64"),
    ((), "dataset.size", 1000.0, "dataset.size must be an integer, got 1000.0"),
    ((), "dataset.val_fraction", "0.2", "dataset.val_fraction must be a number, got '0.2'"),
    ((), "backend.device", "0", "backend.device must be an integer, got '0'"),
    ((), "backend.name", None, "backend.name must be a string, got None"),
    ((), "kvstore.type", 3, "kvstore.type must be a string, got 3"),
    ((), "backend.dtype", None, "backend.dtype must be a string, got None"),
    ((), "loss_scale._target_", 3, "loss_scale._target_ must be a dotted path or null (no loss "
                                   "scaling), got 3"),
    ((), "updater._target_", None, "updater._target_ must be a string, got None"),
    ((), "seed", 1.5, "seed must be an integer, got 1.5"),
    ((), "resume", 3, "resume must be a run or checkpoint directory, got 3"),
    ((), "scheduler.base_lr", "x", "scheduler.base_lr must be a number, got 'x'"),
    (("scheduler=cosine",), "scheduler.max_update", 1.5,
     "scheduler.max_update must be an integer, got 1.5"),
    (("scheduler=factor",), "scheduler.step", 2.5, "scheduler.step must be an integer, got 2.5"),
    (("scheduler=multifactor",), "scheduler.step", 500, "scheduler.step must be a list, got 500"),
    (("scheduler=plateau",), "scheduler.monitor", 3, "scheduler.monitor must be a string, got 3"),
    (("optimizer=lamb",), "optimizer.upper_bound", [1], "optimizer.upper_bound must be a number, "
                                                        "got [1]"),
    (("optimizer=rmsprop",), "optimizer.clip_weights", "x",
     "optimizer.clip_weights must be a number, got 'x'"),
    (("optimizer=lbsgd",), "optimizer.warmup_epochs", 0.5,
     "optimizer.warmup_epochs must be an integer, got 0.5"),
    ((), "updater.accum_grad", "2", "updater.accum_grad must be an integer, got '2'"),
    (("updater=parallel",), "updater.devices", 2.5,
     "updater.devices must be an integer or a list of device ids, got 2.5"),
    ((), "updater.callbacks.update_on_finish", 5, "updater.callbacks.update_on_finish must be a "
     "dotted name, a mapping with _target_ or a list of these, got 5"),
    ((), "updater.callbacks", "x", "updater.callbacks must be a mapping, got 'x'"),
    (("loss_scale=dynamic",), "loss_scale.interval", 1.5,
     "loss_scale.interval must be an integer, got 1.5"),
    (("loss_scale=static",), "loss_scale.scale", "big", "loss_scale.scale must be a number, "
                                                        "got 'big'"),
], ids=lambda v: v if isinstance(v, str) and "." in v and " " not in v else None)
def test_a_wrong_type_is_refused(overrides, key, value, message):
    assert _refused(schema.check_types, _config(overrides, {key: value})) == message


@pytest.mark.parametrize("overrides, key, value", [
    ((), "optimizer.learning_rate", 1),
    ((), "trainer.max_iterations", None),
    ((), "trainer.max_epochs", 2),
    ((), "trainer.max_epochs", 0.5),
    ((), "trainer.keep_checkpoints", None),
    ((), "optimizer.clip_gradient", 1),
    (("optimizer=lamb",), "optimizer.lower_bound", 0.1),
    (("optimizer=ftrl",), "optimizer.beta", 0.5),
    (("optimizer=lars",), "optimizer.eps", 1e-9),
    (("scheduler=poly",), "scheduler.pwr", 0.5),
    (("scheduler=cosine",), "scheduler.max_update", 100),
    (("updater=parallel",), "updater.devices", [0, 0]),
    ((), "updater.callbacks.update_on_finish", "m.f"),
    ((), "updater.callbacks.update_on_finish", {"_target_": "m.F", "path": "x"}),
    ((), "updater.callbacks.update_on_finish", ["m.f", {"_target_": "m.F"}]),
    ((), "updater.callbacks", None),
    ((), "model.hidden_sizes", []),
    ((), "resume", "/some/run"),
    ((), "model.depth", "any value"),  # added with +: its constructor checks it
])
def test_other_values_of_a_fields_type_pass(overrides, key, value):
    schema.check_types(_config(overrides, {key: value}))


# -- ranges -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("option, field, value, message", [
    ("spirals", "noise", -0.1, "dataset.noise must be >= 0, got -0.1"),
    ("spirals", "turns", 0, "dataset.turns must be > 0, got 0"),
    ("blobs", "spread", -1.0, "dataset.spread must be >= 0, got -1.0"),
    ("blobs", "n_classes", 1, "dataset.n_classes must be >= 2, got 1"),
    ("blobs", "n_features", 0, "dataset.n_features must be >= 1, got 0"),
    ("regression", "n_targets", 0, "dataset.n_targets must be >= 1, got 0"),
    ("regression", "noise", -1, "dataset.noise must be >= 0, got -1"),
    ("mnist_like", "n_classes", 0, "dataset.n_classes must be >= 2, got 0"),
])
def test_dataset_options_are_range_checked_by_their_generator(option, field, value, message):
    import numpy

    from trainer_run.runner.build import build_data

    section = _config([f"dataset={option}"], {f"dataset.{field}": value})["dataset"]
    assert _refused(build_data, section, numpy.random.default_rng(0)) == message


@pytest.mark.parametrize("overrides, values, message", [
    (("optimizer=ftml", "scheduler=cosine"), {}, "optimizer.learning_rate must stay > 0 (d_t "
     "divides by it), but the schedule ends at final_lr=0.0: set scheduler.final_lr > 0"),
    (("optimizer=ftrl", "scheduler=poly"), {}, "optimizer.learning_rate must stay > 0 (z and the "
     "weight divide by it), but the schedule ends at final_lr=0.0: set scheduler.final_lr > 0"),
    (("optimizer=ftml",), {"scheduler.warmup_steps": 10, "scheduler.warmup_mode": "constant"},
     "but a constant warmup stays at warmup_begin_lr=0.0: set scheduler.warmup_begin_lr > 0"),
    (("optimizer=ftml", "scheduler=cosine"), {"scheduler.warmup_steps": 10,
                                              "scheduler.warmup_mode": "constant",
                                              "scheduler.final_lr": 1e-5},
     "but a constant warmup stays at warmup_begin_lr=0.0: set scheduler.warmup_begin_lr > 0"),
    (("optimizer=ftrl", "scheduler=factor"), {"scheduler.factor": 0.0,
                                               "scheduler.stop_factor_lr": 0.0},
     "but factor=0.0 brings it down to stop_factor_lr=0.0: set scheduler.stop_factor_lr > 0"),
    (("optimizer=ftml", "scheduler=multifactor"), {"scheduler.factor": 0.0},
     "but every reduction multiplies it by factor=0.0: set scheduler.factor > 0"),
    (("optimizer=ftml", "scheduler=plateau"), {"scheduler.factor": 0.0},
     "but factor=0.0 brings it down to min_lr=0.0: set scheduler.min_lr > 0"),
    (("optimizer=ftrl", "scheduler=cosine"), {"optimizer.learning_rate": 0.0},
     "optimizer.learning_rate must be > 0, got 0.0 (z and the weight divide by it)"),
])
def test_a_schedule_reaching_zero_is_refused_for_optimizers_dividing_by_the_rate(
        overrides, values, message):
    """The optimizer's constructor refuses it (the one check; the schema leaves it alone)."""
    config = _config(overrides, values)
    schema.check_types(config)
    refused = _refused(build_optimizer, config["optimizer"], config["scheduler"], 100)
    assert message in refused and refused.startswith("optimizer.learning_rate must ")


@pytest.mark.parametrize("overrides, values", [
    (("optimizer=ftml", "scheduler=cosine"), {"scheduler.final_lr": 1e-5}),
    (("optimizer=ftml",), {"scheduler.warmup_steps": 10}),  # linear warmup: > 0 from update 1
    (("optimizer=ftml",), {"scheduler.warmup_steps": 10, "scheduler.warmup_mode": "constant",
                           "scheduler.warmup_begin_lr": 1e-4}),
    (("optimizer=ftrl", "scheduler=factor"), {"scheduler.factor": 0.0}),  # floored at 1e-8
    (("optimizer=ftml", "scheduler=plateau"), {"scheduler.factor": 0.0, "scheduler.min_lr": 1e-6}),
    (("optimizer=ftml", "scheduler=multifactor"), {"scheduler.factor": 0.5}),
    (("optimizer=adam", "scheduler=cosine"), {}),
    (("optimizer=sgd", "scheduler=multifactor"), {"scheduler.factor": 0.0}),
])
def test_schedules_that_stay_positive_pass(overrides, values):
    config = _config(overrides, values)
    schema.check_types(config)
    build_optimizer(config["optimizer"], config["scheduler"], 100)


def test_an_unknown_kvstore_type_is_refused():
    assert _refused(schema.check_types, _config((), {"kvstore.type": "nccl"})) == (
        "kvstore.type='nccl' is unknown; choose one of device, dist_async, dist_device_sync, dist_sync, "
        "local, none")


def _validate(config, out):
    """What ``trainer-run`` does with a composed config before training: check, then build."""
    schema.check_types(config)
    build_trainer(config, out)


@pytest.mark.parametrize("overrides, key, value, message", [
    ((), "seed", -1, "seed must be >= 0, got -1"),
    ((), "backend.device", -1, "backend.device must be >= 0, got -1"),
    ((), "model.hidden_sizes", [0], "model.hidden_sizes must be positive integers"),
    ((), "dataset.size", 1, "dataset.size must be >= 2, got 1"),
    ((), "dataset.val_fraction", 1.5, "dataset.val_fraction must be <= 1, got 1.5"),
    ((), "dataset.batch_size", 0, "dataset.batch_size must be >= 1, got 0"),
    ((), "dataset.noise", -1.0, "dataset.noise must be >= 0, got -1.0"),
    ((), "optimizer.learning_rate", -0.1, "optimizer.learning_rate must be >= 0, got -0.1"),
    ((), "scheduler.warmup_steps", -1, "scheduler.warmup_steps must be >= 0, got -1"),
    (("scheduler=cosine",), "scheduler.final_lr", -0.1, "scheduler.final_lr must be >= 0"),
    (("scheduler=factor",), "scheduler.factor", 1.5, "scheduler.factor must be <= 1"),
    (("scheduler=multifactor",), "scheduler.step", [0], "scheduler.step[0] must be >= 1"),
    (("scheduler=plateau",), "scheduler.patience", -1, "scheduler.patience must be >= 0"),
    (("scheduler=poly",), "scheduler.pwr", -1.0, "scheduler.pwr must be >= 0"),
    ((), "updater.accum_grad", 0, "updater.accum_grad must be >= 1, got 0"),
    (("updater=parallel", "kvstore=local"), "updater.devices", 0, "updater.devices must be >= 1"),
    (("loss_scale=static",), "loss_scale.scale", 0.0, "loss_scale.scale must be > 0"),
    (("loss_scale=dynamic",), "loss_scale.scaling_factor", 1.0,
     "loss_scale.scaling_factor must be > 1"),
    (("loss_scale=dynamic",), "loss_scale.max_retries", -1, "loss_scale.max_retries must be >= 0"),
    ((), "kvstore.type", "nccl", "kvstore.type='nccl' is unknown"),
    ((), "backend.dtype", "bfloat16", "backend.dtype='bfloat16' is not a compute dtype"),
    ((), "backend.name", "tpu", "backend.name='tpu' is not a backend; choose one of numpy, cupy, auto"),
    (("kvstore=dist_sync",), "kvstore.timeout", 0, "kvstore.timeout must be > 0, got 0"),
    ((), "trainer.max_iterations", 0, "trainer.max_iterations must be >= 1, got 0"),
    ((), "trainer.max_epochs", 0, "trainer.max_epochs must be > 0, got 0"),
    ((), "trainer.log_interval", 0, "trainer.log_interval must be >= 1, got 0"),
    ((), "trainer.eval_interval", 0, "trainer.eval_interval must be >= 1, got 0"),
    ((), "trainer.checkpoint_interval", 0, "trainer.checkpoint_interval must be >= 1, got 0"),
    ((), "trainer.keep_checkpoints", 0, "trainer.keep_checkpoints must be >= 1, got 0"),
], ids=lambda v: v if isinstance(v, str) and "." in v and " " not in v else None)
def test_a_value_out_of_range_in_any_group_is_refused_before_training(tmp_path, overrides, key,
                                                                     value, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        _validate(_config(overrides, {key: value}), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


OPTIMIZER_RANGES = [
    ("adadelta", "rho", 1.5, "optimizer.rho must be <= 1, got 1.5"),
    ("adagrad", "eps", -1e-7, "optimizer.eps must be >= 0"),
    ("adam", "beta1", 1.0, "optimizer.beta1 must be < 1, got 1.0"),
    ("adamax", "beta1", 1.0, "optimizer.beta1 must be < 1, got 1.0"),
    ("adamw", "beta2", 1.0, "optimizer.beta2 must be < 1, got 1.0"),
    ("ccsgd", "momentum", 1.5, "optimizer.momentum must be <= 1, got 1.5"),
    ("dcasgd", "momentum", -0.1, "optimizer.momentum must be >= 0, got -0.1"),
    ("ftml", "learning_rate", 0.0, "optimizer.learning_rate must be > 0, got 0.0"),
    ("ftrl", "learning_rate", 0.0, "optimizer.learning_rate must be > 0, got 0.0"),
    ("groupadagrad", "wd", 0.1, "optimizer.wd must be 0"),
    ("lamb", "beta1", 1.0, "optimizer.beta1 must be < 1, got 1.0"),
    ("lars", "eta", -0.001, "optimizer.eta must be >= 0, got -0.001"),
    ("lbsgd", "batch_scale", 0, "optimizer.batch_scale must be >= 1, got 0"),
    ("nadam", "beta2", 1.0, "optimizer.beta2 must be < 1, got 1.0"),
    ("nag", "momentum", 2.0, "optimizer.momentum must be <= 1, got 2.0"),
    ("rmsprop", "gamma1", 1.5, "optimizer.gamma1 must be <= 1, got 1.5"),
    ("sgd", "momentum", -1.0, "optimizer.momentum must be >= 0, got -1.0"),
    ("sgld", "wd", -1.0, "optimizer.wd must be >= 0, got -1.0"),
    ("signum", "wd_lh", -1.0, "optimizer.wd_lh must be >= 0, got -1.0"),
    ("test", "begin_num_update", -1, "optimizer.begin_num_update must be >= 0, got -1"),
    # the other fields refused where MXNet's math breaks
    ("adam", "beta2", 1.0, "optimizer.beta2 must be < 1, got 1.0"),
    ("adamw", "beta1", 1.0, "optimizer.beta1 must be < 1, got 1.0"),
    ("ftml", "beta1", 1.0, "optimizer.beta1 must be < 1, got 1.0"),
    ("ftml", "beta2", 1.0, "optimizer.beta2 must be < 1, got 1.0"),
    ("lamb", "beta2", 1.0, "optimizer.beta2 must be < 1, got 1.0"),
]


def test_the_optimizer_range_table_covers_every_optimizer():
    assert {row[0] for row in OPTIMIZER_RANGES} == set(optimizers.REGISTRY) == set(
        schema.OPTIONS["optimizer"])


@pytest.mark.parametrize("name, field, value, message", OPTIMIZER_RANGES,
                         ids=[f"{r[0]}.{r[1]}" for r in OPTIMIZER_RANGES])
def test_every_optimizer_refuses_a_value_out_of_range(name, field, value, message):
    config = _config([f"optimizer={name}"], {f"optimizer.{field}": value})
    schema.check_types(config)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        build_optimizer(config["optimizer"], config["scheduler"], 100)


@pytest.mark.parametrize("name, field, value", [
    ("adam", "beta1", 0.0), ("adamax", "beta2", 1.0), ("adadelta", "rho", 1.0),
    ("adagrad", "eps", 0.0), ("rmsprop", "gamma1", 1.0), ("sgd", "momentum", 1.0),
    ("nadam", "beta1", 1.0), ("ftrl", "learning_rate", 1e-6), ("lars", "eps", 0.0),
    ("sgd", "clip_gradient", -1.0), ("lamb", "upper_bound", -1.0), ("dcasgd", "lamda", -0.1),
])
def test_values_mxnet_accepts_stay_accepted(name, field, value):
    config = _config([f"optimizer={name}"], {f"optimizer.{field}": value})
    schema.check_types(config)
    build_optimizer(config["optimizer"], config["scheduler"], 100)


# -- the command line -------------------------------------------------------------------------------
