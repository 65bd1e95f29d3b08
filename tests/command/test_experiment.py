"""``experiment=<name>``: a preset file that chooses options and sets values in one place,
ours (``configs/experiment/``) or the user's (``--config-dir DIR`` with ``DIR/experiment/``)."""

from __future__ import annotations

import json

import numpy as np
from helpers import run_cli
from image_files import cifar_archive
from omegaconf import OmegaConf

from trainer_run.compose.options import CONFIGS, option_section


def _composed(*argv) -> dict:
    """The config ``trainer-run --cfg job <argv>`` prints, read back with OmegaConf."""
    result = run_cli("--cfg", "job", *argv)
    assert result.returncode == 0, result.stderr
    return OmegaConf.to_container(OmegaConf.create(result.stdout))


def test_an_experiment_composes_what_its_file_says():
    plain = _composed()
    config = _composed("experiment=spirals_mlp_sgd")
    tree = OmegaConf.to_container(OmegaConf.load(CONFIGS / "experiment" / "spirals_mlp_sgd.yaml"))
    for entry in tree.pop("defaults"):
        (key, option), = entry.items()
        group = key.split("/")[-1]
        target = option_section(group, option).get("_target_")
        assert config[group]["_target_"] == target
    for section, values in tree.items():
        for key, value in (values.items() if isinstance(values, dict) else [(None, values)]):
            assert (config[section] if key is None else config[section][key]) == value
    assert plain["optimizer"]["_target_"] == "trainer_run.optimizers.Adam"  # only the preset changes it
    assert config["optimizer"]["momentum"] == 0.9 and config["model"]["hidden_sizes"] == [128, 128]
    assert config["optimizer"]["wd"] == plain["optimizer"]["wd"]


def test_command_line_overrides_apply_on_top_of_an_experiment():
    config = _composed("experiment=spirals_mlp_sgd", "optimizer.learning_rate=0.02")
    assert config["optimizer"]["learning_rate"] == 0.02
    assert config["optimizer"]["_target_"] == "trainer_run.optimizers.SGD"


def test_a_users_experiment_in_a_config_dir(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text(
        "# @package _global_\n# RMSProp at 0.005 on blobs.\ndefaults:\n"
        "  - override /optimizer: rmsprop\n  - override /dataset: blobs\n"
        "optimizer:\n  learning_rate: 0.005\n")
    config = _composed("--config-dir", tmp_path, "experiment=mine")
    assert config["optimizer"]["_target_"] == "trainer_run.optimizers.RMSProp"
    assert config["optimizer"]["learning_rate"] == 0.005
    assert config["optimizer"]["gamma1"] == option_section("optimizer", "rmsprop")["gamma1"]
    assert config["dataset"]["_target_"] == option_section("dataset", "blobs")["_target_"]


def test_an_experiment_trains(tmp_path):
    run = tmp_path / "run"
    result = run_cli("experiment=spirals_mlp_sgd", "trainer.max_iterations=5",
                     "scheduler.warmup_steps=2", "trainer.progress=false", f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr
    saved = OmegaConf.load(run / ".hydra" / "config.yaml")
    assert saved.optimizer._target_ == "trainer_run.optimizers.SGD" and saved.seed == 1
    assert saved.scheduler._target_ == "trainer_run.schedulers.CosineScheduler"


def test_an_unknown_experiment_is_one_line_error():
    result = run_cli("experiment=nosuch")
    assert result.returncode == 2
    line = result.stderr.strip()
    assert line.startswith("error: experiment=nosuch is not available; choose one of ")
    assert "spirals_mlp_sgd" in line and "\n" not in line


def test_an_experiment_checked_with_debug_fast(tmp_path):
    """debug=fast on top of an experiment: its 3 iterations, the experiment's choices (and no
    warmup, which a 3-iteration schedule has no room for)."""
    import json
    run = tmp_path / "run"
    result = run_cli("experiment=spirals_mlp_sgd", "debug=fast", f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr
    saved = OmegaConf.load(run / ".hydra" / "config.yaml")
    assert saved.optimizer.momentum == 0.9 and saved.scheduler.warmup_steps == 0
    assert json.loads((run / "summary.json").read_text())["iteration"] == 3


def test_the_cifar10_resnet_recipe_trains_on_cifar_shaped_data(tmp_path):
    """No copy of CIFAR-10 is reachable here: an archive of its format, 20 records a batch."""
    root = tmp_path / "data"
    root.mkdir()
    arrays = cifar_archive(root / "cifar-10-binary.tar.gz", per_batch=20, prototypes=True)
    run = tmp_path / "run"
    result = run_cli("experiment=cifar10_resnet", f"dataset.root={root}", "dataset.md5.archive=null",
                     "dataset.examples={train:100,test:20}", "dataset.batch_size=16",
                     "scheduler.warmup_steps=2", "trainer.max_epochs=null", "trainer.max_iterations=4",
                     "trainer.progress=false", f"hydra.run.dir={run}")
    assert result.returncode == 0, result.stderr
    config = OmegaConf.to_container(OmegaConf.load(run / ".hydra" / "config.yaml"))
    assert config["dataset"]["transforms"] == ["random_crop", "horizontal_flip"]
    assert config["model"]["depth"] == 20 and config["optimizer"]["momentum"] == 0.9
    assert config["scheduler"]["_target_"] == "trainer_run.schedulers.CosineScheduler"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["iteration"] == 4 and 0 <= summary["test/accuracy"] <= 1
    with np.load(run / "normalization.npz") as values:
        mean, std = values["mean"], values["std"]
    pixels = arrays["train"][0].astype(np.float64)
    assert mean.shape == std.shape == (3, 1, 1)
    # 90 of the 100 training images (10% held out): close to all 100's channel moments
    np.testing.assert_allclose(mean.ravel(), pixels.mean(axis=(0, 2, 3)), rtol=0.1)
    np.testing.assert_allclose(std.ravel(), pixels.std(axis=(0, 2, 3)), rtol=0.1)
