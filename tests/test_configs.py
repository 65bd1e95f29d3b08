"""Every config file: its arguments are the class's, with the class's defaults, and it trains."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from trainer_run import optimizers
from trainer_run.compose.schema import option_section
from trainer_run.runner.arguments import accepted, locate
from trainer_run.runner.build import build_trainer

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
NOT_IN_YAML = {"param_idx2name", "param_dict", "lr_scheduler"}
OPTIMIZERS = sorted(p.stem for p in (CONFIGS / "optimizer").glob("*.yaml"))
SCHEDULERS = sorted(p.stem for p in (CONFIGS / "scheduler").glob("*.yaml"))


def _defaults(klass) -> dict:
    defaults = {}
    for cls in reversed(klass.__mro__):
        init = cls.__dict__.get("__init__")
        if init is not None:
            defaults.update({p.name: p.default for p in inspect.signature(init).parameters.values()
                             if p.default is not inspect.Parameter.empty})
    if "learning_rate" in defaults and defaults["learning_rate"] is None:
        defaults["learning_rate"] = 0.01  # MXNet 1.9: None is 0.01 when no scheduler owns the rate
    return defaults


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_every_registered_optimizer_has_a_config():
    assert set(OPTIMIZERS) == set(optimizers.REGISTRY)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_config_lists_every_argument_with_its_default(name):
    section = option_section("optimizer", name)
    klass = locate(section["_target_"], "optimizer._target_")
    assert set(section) - {"_target_"} == set(accepted(klass)) - NOT_IN_YAML
    defaults = _defaults(klass)
    for key, value in section.items():
        if key != "_target_":
            assert value == defaults[key], f"{name}.{key}: {value} != MXNet default {defaults[key]}"


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_config_arguments_are_accepted(name):
    section = option_section("scheduler", name)
    klass = locate(section["_target_"], "scheduler._target_")
    assert set(section) - {"_target_"} <= set(accepted(klass))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_trains_from_the_config(tmp_path, name):
    ascends = name == "test"  # MXNet's Test optimizer ascends the gradient: w += rescale_grad * grad
    cfg = _compose(f"optimizer={name}", "trainer.max_iterations=128", "trainer.progress=false",
                   "trainer.eval_interval=128", "trainer.log_interval=64",  # two epochs each
                   f"updater.max_skipped_in_a_row={'null' if ascends else 100}",
                   f"updater.nan_policy={'skip' if ascends else 'stop'}")
    config = OmegaConf.to_container(cfg, resolve=True)
    trainer = build_trainer(config, tmp_path)
    trainer.run()
    rows = trainer.get_extension("log_report").log
    first, last = rows[0]["train/loss"], rows[-1]["train/loss"]
    assert trainer.status == "completed" and len(rows) == 2
    if ascends:
        return
    assert math.isfinite(last)
    if name != "sgld":
        assert last < first, f"{name}: loss {first} -> {last}"
