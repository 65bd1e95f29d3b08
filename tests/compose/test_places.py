"""trainer_run.compose.places: the keys of a stranger's config that name a place get the user's value.

The expected values are read here from our config files as YAML (``configs/dataset/mnist.yaml``
...), not through the module's own reading of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import trainer_run.configs
from trainer_run.compose import places
from trainer_run.errors import ConfigError

CONFIGS = Path(trainer_run.configs.__file__).parent
TARGETS = {"mnist": "trainer_run.data.image_sets.mnist",
           "fashion_mnist": "trainer_run.data.image_sets.fashion_mnist",
           "cifar10": "trainer_run.data.image_sets.cifar10"}


def our_file(group: str, name: str) -> dict:
    return yaml.safe_load((CONFIGS / group / f"{name}.yaml").read_text())


def strangers_image_set(name: str) -> dict:
    return {"_target_": TARGETS[name], "root": "/tmp/strangers-choice", "batch_size": 7,
            "mirrors": ["file:///home/user/"], "md5": None, "examples": {"train": 1, "test": 1},
            "timeout": 5.0}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_an_image_set_gets_our_root_mirrors_md5_and_counts(name, tmp_path):
    config = {"dataset": strangers_image_set(name), "seed": 3}
    places.bounded(config, tmp_path, "run X")
    ours = our_file("dataset", name)
    section = config["dataset"]
    assert section["root"] is None  # the user's own: $TRAINER_RUN_DATA, else the cache
    assert (section["mirrors"], section["md5"], section["examples"]) == (
        ours["mirrors"], ours["md5"], ours["examples"])
    assert all(len(digest) == 32 for digest in section["md5"].values())
    assert (section["batch_size"], section["timeout"], config["seed"]) == (7, 5.0, 3)  # no places


def test_the_users_own_keys_are_kept(tmp_path):
    config = {"dataset": strangers_image_set("mnist")}
    places.bounded(config, tmp_path, "run X", given=["dataset.root", "dataset.md5.train_images"])
    section = config["dataset"]
    assert section["root"] == "/tmp/strangers-choice" and section["md5"] is None
    assert section["mirrors"] == our_file("dataset", "mnist")["mirrors"]


def test_our_values_are_copies(tmp_path):
    first, second = ({"dataset": strangers_image_set("mnist")} for _ in range(2))
    places.bounded(first, tmp_path, "run X")
    first["dataset"]["mirrors"].append("http://evil/")
    first["dataset"]["md5"]["train_images"] = "0" * 32
    places.bounded(second, tmp_path, "run X")
    assert second["dataset"]["mirrors"] == our_file("dataset", "mnist")["mirrors"]
    assert second["dataset"]["md5"] == our_file("dataset", "mnist")["md5"]


def test_a_renamed_mlflow_logger_gets_our_tracking_uri(tmp_path):
    target = our_file("logger", "mlflow")["mlflow"]["_target_"]
    config = {"logger": {"jsonl": {"_target_": "trainer_run.training.loggers.jsonl.JsonLines"},
                         "mine": {"_target_": target, "tracking_uri": "http://10.0.0.1:5000",
                                  "experiment_name": "theirs"}}}
    places.bounded(config, tmp_path, "run X")
    assert config["logger"]["mine"] == {"_target_": target, "tracking_uri": None,
                                        "experiment_name": "theirs"}
    assert config["logger"]["jsonl"] == {"_target_": "trainer_run.training.loggers.jsonl.JsonLines"}


def test_files_inside_the_run_are_read(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    monkeypatch.chdir(run)
    section = {"_target_": "trainer_run.data.csv_files.csv", "path": str(run / "data" / "a.csv"),
               "val_path": "data/b.csv", "test_path": None}
    config = {"dataset": dict(section)}
    places.bounded(config, run, "run X")
    assert config["dataset"] == section


@pytest.mark.parametrize("value", ["/etc/passwd", "../outside.csv", "data/link.csv", "~/x.csv"])
def test_a_file_outside_the_run_is_refused(value, tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    os.symlink(tmp_path / "secret.csv", run / "data" / "link.csv")
    monkeypatch.chdir(run)
    config = {"dataset": {"_target_": our_file("dataset", "csv")["_target_"], "path": value}}
    with pytest.raises(ConfigError) as refused:
        places.bounded(config, run, "run X")
    assert str(refused.value) == (
        f"run X is not signed by you and its dataset.path={value} names a file outside the run, "
        "so trainer-run does not read it on the run's word; give it yourself "
        "(dataset.path=<file> on the command line) to use it")
    places.bounded(config, run, "run X", given=["dataset.path"])  # the user's own: kept
    assert config["dataset"]["path"] == value


@pytest.mark.parametrize("name", ["npz", "npy", "idx"])
def test_every_file_key_of_the_file_datasets_is_bounded(name, tmp_path):
    section = our_file("dataset", name)
    keys = [k for k in section if k.endswith("path") or k.endswith(("_images", "_labels"))]
    assert keys and sorted(keys) == sorted(places.FILES[("dataset", name)])
    for key in keys:
        config = {"dataset": {"_target_": section["_target_"], key: "/etc/hosts"}}
        with pytest.raises(ConfigError, match=f"dataset.{key}=/etc/hosts names a file outside"):
            places.bounded(config, tmp_path, "run X")


def test_a_users_own_target_is_left_to_trust(tmp_path):
    config = {"dataset": {"_target_": "my_data.load", "root": "/anywhere", "path": "/etc/hosts"}}
    places.bounded(config, tmp_path, "run X")
    assert config["dataset"] == {"_target_": "my_data.load", "root": "/anywhere",
                                 "path": "/etc/hosts"}
