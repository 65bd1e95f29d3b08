"""Runs saved before the runner's groups named their callable with ``_target_``
(trainer_run/config_upgrade.py): their configs are upgraded (such a run resumed by the command:
tests/command/test_config_upgrade.py)."""

from __future__ import annotations

import copy

import pytest
import yaml

from trainer_run.compose.options import CONFIGS, option_section
from trainer_run.config_upgrade import DTYPES, TARGETS, upgrade
from trainer_run.errors import ConfigError

CALLBACKS = {hook: None for hook in ("forward_on_start", "forward_on_finish", "backward_on_start",
                                     "backward_on_finish", "comm_on_start", "comm_on_finish",
                                     "update_on_start", "update_on_finish")}
OLD = {
    "backend": {"name": "numpy", "device": 0},
    "updater": {"name": "parallel", "accum_grad": 1, "callbacks": CALLBACKS, "devices": 2},
    "loss_scale": {"name": "dynamic", "scale": 1e30, "scaling_factor": 2.0, "interval": 2000,
                   "on_overflow": "skip", "max_retries": 100},
    "precision": {"name": "fp16"},
    "kvstore": {"name": "local", "update_on_kvstore": None},
}
"""The sections a run of ``precision=fp16 updater=parallel kvstore=local loss_scale.scale=1e30``
saved before (as trainer-run wrote them)."""
NEW = {
    "backend": {"_target_": "trainer_run.backend.get_backend", "name": "numpy", "device": 0,
                "dtype": "float16"},
    "updater": {"_target_": "trainer_run.updaters.ParallelUpdater", "accum_grad": 1,
                "callbacks": CALLBACKS, "devices": 2},
    "loss_scale": {"_target_": "trainer_run.loss_scaling.DynamicLossScaler", "scale": 1e30,
                   "scaling_factor": 2.0, "interval": 2000, "on_overflow": "skip",
                   "max_retries": 100},
    "kvstore": {"_target_": "trainer_run.kvstore.request.KVStoreRequest", "type": "local",
                "update_on_kvstore": None},
}


UPGRADED = {**NEW, "backend": {**NEW["backend"], "threads": None, "deferred": None},
            "updater": {**NEW["updater"], "nan_policy": "stop", "max_skipped_in_a_row": 100,
                        "prefetch": 0, "clip_global_norm": None}}
"""What a resumed run of :data:`OLD` saves of them: :data:`NEW` and the shared keys added since
(``backend.threads``, ``backend.deferred``, the updater's keys that moved from other sections:
tests/test_moved_keys.py); an option's own keys stay as saved."""
SAVED = {**UPGRADED, "loss_scale": {**NEW["loss_scale"], "growth": "interval"},
         "updater": {**UPGRADED["updater"], "grad_reduce": "mean"}}
"""What a run saves of them today: :data:`UPGRADED` and the option keys added since
(``loss_scale.growth``, ``updater.grad_reduce``)."""


# -- the function -------------------------------------------------------------------------------
def test_old_sections_get_their_target_and_precision_becomes_the_backends_dtype():
    saved = {**copy.deepcopy(OLD), "seed": 3, "model": {"_target_": "trainer_run.models.MLP"}}
    assert upgrade(saved) == {**NEW, "seed": 3, "model": {"_target_": "trainer_run.models.MLP"}}
    assert saved["precision"] == {"name": "fp16"}  # the argument is left as it was


@pytest.mark.parametrize("section, expected", [
    ({"name": "none"}, {"_target_": None}),
    ({"name": "static", "scale": 1024.0},
     {"_target_": "trainer_run.loss_scaling.LossScaler", "scale": 1024.0}),
])
def test_loss_scale_none_becomes_a_null_target(section, expected):
    assert upgrade({"loss_scale": section}) == {"loss_scale": expected}


def test_an_old_kvstore_keeps_its_compression_and_timeout():
    old = {"name": "dist_sync", "update_on_kvstore": True, "timeout": 5.0,
           "compression": {"type": "2bit", "threshold": 0.1}}
    assert upgrade({"kvstore": old})["kvstore"] == {
        "_target_": "trainer_run.kvstore.request.KVStoreRequest", "type": "dist_sync",
        "update_on_kvstore": True, "timeout": 5.0, "compression": {"type": "2bit", "threshold": 0.1}}


def test_a_config_of_the_new_form_is_unchanged():
    assert upgrade(copy.deepcopy(NEW)) == NEW
    assert upgrade({}) == {}


def test_an_old_name_no_run_could_have_had_is_refused():
    with pytest.raises(ConfigError, match=r"^the saved config's updater.name='fancy' is none"):
        upgrade({"updater": {"name": "fancy"}})
    with pytest.raises(ConfigError, match=r"^the saved config's precision.name='bf16' is none"):
        upgrade({"precision": {"name": "bf16"}})


@pytest.mark.parametrize("group, name", [(g, n) for g, table in TARGETS.items() for n in table])
def test_each_old_name_upgrades_to_the_target_of_the_option_of_that_name(group, name):
    assert TARGETS[group][name] == option_section(group, name)["_target_"]


@pytest.mark.parametrize("name", DTYPES)
def test_each_old_precision_upgrades_to_the_dtype_its_preset_sets(name):
    preset = yaml.safe_load((CONFIGS / "precision" / f"{name}.yaml").read_text())
    assert DTYPES[name] == preset["backend"]["dtype"]
