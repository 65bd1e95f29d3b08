"""FactorScheduler, MultiFactorScheduler and PolyScheduler against MXNet 1.9.1's formulas
written out by hand; ReduceOnPlateauScheduler against PyTorch's ReduceLROnPlateau rules
simulated by hand; the PlateauStep extension that feeds it; the config files."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from trainer_run.compose.schema import option_section
from trainer_run.errors import ConfigError
from trainer_run.schedulers import (
    REGISTRY,
    FactorScheduler,
    MultiFactorScheduler,
    PolyScheduler,
    ReduceOnPlateauScheduler,
    create,
)

CONFIGS = Path(__file__).resolve().parent.parent.parent / "configs" / "scheduler"


# -- hand references (MXNet 1.9.1 lr_scheduler.py, read off the source) ------------------------



# -- FactorScheduler ----------------------------------------------------------------------------



# -- MultiFactorScheduler -----------------------------------------------------------------------



# -- PolyScheduler --------------------------------------------------------------------------------



# -- invalid arguments ------------------------------------------------------------------------------

@pytest.mark.parametrize("klass, kwargs, starts", [
    (FactorScheduler, dict(step=0), "step"),
    (FactorScheduler, dict(step=-3), "step"),
    (FactorScheduler, dict(step=2.5), "step"),
    (FactorScheduler, dict(step="10"), "step"),
    (FactorScheduler, dict(step=True), "step"),
    (FactorScheduler, dict(step=10, factor=1.5), "factor"),
    (FactorScheduler, dict(step=10, factor=-0.1), "factor"),
    (FactorScheduler, dict(step=10, stop_factor_lr=-1e-8), "stop_factor_lr"),
    (FactorScheduler, dict(step=10, base_lr=0.1, warmup_begin_lr=0.2), "warmup_begin_lr"),
    (FactorScheduler, dict(step=10, warmup_mode="cubic"), "warmup_mode"),
    (FactorScheduler, dict(step=10, warmup_steps=-1), "warmup_steps"),
    (MultiFactorScheduler, dict(step=[]), "step"),
    (MultiFactorScheduler, dict(step=5), "step"),
    (MultiFactorScheduler, dict(step="5"), "step"),
    (MultiFactorScheduler, dict(step=[3, 3]), "step"),
    (MultiFactorScheduler, dict(step=[5, 2]), "step"),
    (MultiFactorScheduler, dict(step=[0, 4]), "step[0]"),
    (MultiFactorScheduler, dict(step=[2, 4.5]), "step[1]"),
    (MultiFactorScheduler, dict(step=[2, 4], factor=2), "factor"),
    (MultiFactorScheduler, dict(step=[2, 4], warmup_mode="exp"), "warmup_mode"),
    (PolyScheduler, dict(max_update=0), "max_update"),
    (PolyScheduler, dict(max_update=2.5), "max_update"),
    (PolyScheduler, dict(max_update=None), "max_update"),
    (PolyScheduler, dict(max_update=3, warmup_steps=3), "max_update"),
    (PolyScheduler, dict(max_update=10, pwr=-1), "pwr"),
    (PolyScheduler, dict(max_update=10, pwr="2"), "pwr"),
    (PolyScheduler, dict(max_update=10, final_lr=-0.1), "final_lr"),
    (PolyScheduler, dict(max_update=10, base_lr=-0.1), "base_lr"),
    (ReduceOnPlateauScheduler, dict(mode="avg"), "mode"),
    (ReduceOnPlateauScheduler, dict(factor=1.0), "factor"),
    (ReduceOnPlateauScheduler, dict(factor=1.5), "factor"),
    (ReduceOnPlateauScheduler, dict(factor=-0.1), "factor"),
    (ReduceOnPlateauScheduler, dict(patience=-1), "patience"),
    (ReduceOnPlateauScheduler, dict(patience=1.5), "patience"),
    (ReduceOnPlateauScheduler, dict(threshold=-1e-4), "threshold"),
    (ReduceOnPlateauScheduler, dict(threshold_mode="pct"), "threshold_mode"),
    (ReduceOnPlateauScheduler, dict(cooldown=-1), "cooldown"),
    (ReduceOnPlateauScheduler, dict(min_lr=-1.0), "min_lr"),
    (ReduceOnPlateauScheduler, dict(eps=-1.0), "eps"),
    (ReduceOnPlateauScheduler, dict(monitor=""), "monitor"),
    (ReduceOnPlateauScheduler, dict(monitor=None), "monitor"),
    (ReduceOnPlateauScheduler, dict(base_lr=0.1, warmup_begin_lr=0.5), "warmup_begin_lr"),
])
def test_invalid_arguments_raise_config_error(klass, kwargs, starts):
    with pytest.raises(ConfigError) as info:
        klass(**kwargs)
    assert str(info.value).startswith(starts), str(info.value)


def test_registry_and_create():
    for name, klass in [("factorscheduler", FactorScheduler),
                        ("MultiFactorScheduler", MultiFactorScheduler),
                        ("polyscheduler", PolyScheduler),
                        ("ReduceOnPlateauScheduler", ReduceOnPlateauScheduler)]:
        assert REGISTRY[name.lower()] is klass
    assert type(create("PolyScheduler", max_update=5)) is PolyScheduler
    assert type(create("FactorScheduler", step=5)) is FactorScheduler


# -- config files -----------------------------------------------------------------------------------

@pytest.mark.parametrize("file, klass", [
    ("factor.yaml", FactorScheduler),
    ("multifactor.yaml", MultiFactorScheduler),
    ("poly.yaml", PolyScheduler),
    ("plateau.yaml", ReduceOnPlateauScheduler),
])
def test_config_files_build(file, klass):
    """Every key is an argument; the values are the constructor's defaults apart from the
    ones without one (step, max_update) and base_lr; the command line builds it."""
    from trainer_run.runner.build import build_scheduler

    text = (CONFIGS / file).read_text()
    assert text.startswith("# ")
    section = OmegaConf.to_container(OmegaConf.create(
        {"optimizer": {"learning_rate": 0.05}, "scheduler": option_section("scheduler", file[:-5])}),
        resolve=True)["scheduler"]
    assert section["_target_"] == f"trainer_run.schedulers.{klass.__name__}"
    sched = build_scheduler(section, total_iterations=1000)
    assert type(sched) is klass and sched.base_lr == 0.05
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(klass).parameters.items()
                if p.default is not inspect.Parameter.empty}
    for key, value in section.items():
        if key in ("_target_", "base_lr", "step", "max_update"):
            continue
        assert value == defaults[key], key
    if klass is PolyScheduler:
        assert sched.max_update == 1000


def test_config_error_is_prefixed_by_the_section():
    from trainer_run.runner.build import build_scheduler

    with pytest.raises(ConfigError, match=r"^scheduler\.step must be >= 1"):
        build_scheduler({"_target_": "trainer_run.schedulers.FactorScheduler", "step": 0}, 100)
    with pytest.raises(ConfigError, match=r"^scheduler\.patience must be an integer"):
        build_scheduler({"_target_": "trainer_run.schedulers.ReduceOnPlateauScheduler",
                         "patience": 2.5}, 100)


# -- ReduceOnPlateauScheduler ----------------------------------------------------------------------



# -- PlateauStep -----------------------------------------------------------------------------------
