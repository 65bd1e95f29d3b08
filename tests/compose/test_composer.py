"""compose/composer.py: the config trainer_run.train composes is the command's: the same
config as Hydra's own compose over our configs, a user's folder searched as --config-dir is
(after ours, before the structured configs), Hydra's node filled as a job of the command sees
it, and ${hydra:...} resolving."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from trainer_run.compose import composer
from trainer_run.compose.options import CONFIGS

OVERRIDES = ["optimizer=sgd", "optimizer.learning_rate=0.05", "scheduler=cosine"]


def test_the_config_is_hydras_own_compose_of_our_configs(tmp_path):
    ours = composer.compose(OVERRIDES, [], tmp_path / "run")
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3", job_name="trainer-run"):
        hydras = compose("config", overrides=OVERRIDES)
    assert OmegaConf.to_container(composer.task(ours)) == OmegaConf.to_container(hydras)
    assert "hydra" not in composer.task(ours) and "hydra" in ours
    assert list(ours.hydra.overrides.task) == OVERRIDES
    assert ours.hydra.runtime.choices.optimizer == "sgd"
    assert ours.hydra.mode == RunMode.RUN and ours.hydra.runtime.version_base == "1.3"


def test_a_users_folder_is_searched_as_config_dir_is_and_hydra_resolves(tmp_path):
    (tmp_path / "conf" / "optimizer").mkdir(parents=True)
    (tmp_path / "conf" / "optimizer" / "slow.yaml").write_text(
        "defaults:\n  - sgd\n  - _self_\nlearning_rate: 0.002\nnote: ${hydra:runtime.output_dir}\n")
    cfg = composer.compose(["optimizer=slow"], [tmp_path / "conf"], tmp_path / "run")
    sources = [(s.provider, s.path) for s in cfg.hydra.runtime.config_sources]
    assert sources == [("hydra", "hydra.conf"), ("main", "trainer_run.configs"),
                       ("command-line", str(tmp_path / "conf")), ("schema", "")]
    task = composer.task(cfg)
    assert task.optimizer.learning_rate == 0.002
    assert task.optimizer._target_ == "trainer_run.optimizers.SGD"
    assert HydraConfig.get().runtime.output_dir == str(tmp_path / "run")
    assert task.optimizer.note == str(tmp_path / "run")  # ${hydra:...} as in a job
