"""The hyper-parameters a logger logs (training/loggers/base.py, RunInfo.hyperparameters): the
config's scalars by dotted key, internal keys left out, and a value written with a resolver
(``${oc.env:TOKEN}``), or through a reference to one, as written: its value never."""

from __future__ import annotations

from omegaconf import OmegaConf

from trainer_run.training.loggers import RunInfo

WRITTEN = {
    "seed": 3,
    "optimizer": {"learning_rate": 0.1},
    "scheduler": {"base_lr": "${optimizer.learning_rate}"},  # a reference alone: its value
    "model": {"token": "${oc.env:TOKEN}", "copy": "${.token}", "deeper": "${..model.copy}",
              "tokens": ["a", "${oc.env:TOKEN}"], "made": "${oc.create:{k: 1}}"},
    "dataset": {"path": "/data/${oc.env:TOKEN}/x.npz", "batch_size": 10,
                "md5": {"train_images": "f68b3c2d", "test_images": "9fb629c4"}},
    "updater": {"callbacks": {"forward_on_start": None, "update_on_finish": "my_hooks.log"}},
    "hydra": {"run": {"dir": "runs/${oc.env:TOKEN}"}},
    "resume": None,
}


def _resolved(monkeypatch) -> dict:
    monkeypatch.setenv("TOKEN", "s3cret")
    return OmegaConf.to_container(OmegaConf.create(WRITTEN), resolve=True)


def test_a_resolver_s_value_is_logged_as_written_and_internals_are_left_out(monkeypatch):
    config = _resolved(monkeypatch)
    assert config["model"]["deeper"] == "s3cret" and config["model"]["made"] == {"k": 1}
    assert RunInfo(config, written=WRITTEN).hyperparameters() == {
        "seed": 3, "optimizer.learning_rate": 0.1, "scheduler.base_lr": 0.1,
        "model.token": "${oc.env:TOKEN}", "model.copy": "${.token}", "model.deeper": "${..model.copy}",
        "model.tokens": "['a', '${oc.env:TOKEN}']", "model.made": "${oc.create:{k: 1}}",
        "dataset.path": "/data/${oc.env:TOKEN}/x.npz", "dataset.batch_size": 10,
        "updater.callbacks.update_on_finish": "my_hooks.log"}


def test_without_the_written_config_the_values_are_the_resolved_ones(monkeypatch):
    values = RunInfo(_resolved(monkeypatch)).hyperparameters()
    assert values["model.token"] == "s3cret" and values["model.made.k"] == 1
    assert not [k for k in values if k.startswith(("dataset.md5", "updater.callbacks.forward"))]
