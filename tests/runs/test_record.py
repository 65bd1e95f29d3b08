"""runs/record.py: a new run's record, ``.hydra/``: the composed config, Hydra's config with
the record's folder, the overrides as given, the mark that makes the folder a run of ours and
the user's signature of the config; no record at all for ``hydra.output_subdir=null``."""

from __future__ import annotations

import json

from omegaconf import OmegaConf

from trainer_run.runs import directory, record, trust
from trainer_run.storage import yaml_files

CONFIG = OmegaConf.create({"optimizer": {"_target_": "trainer_run.optimizers.SGD",
                                         "learning_rate": "${seed}"}, "seed": 3})
HYDRA = {"run": {"dir": "runs/x"}, "job": {"name": "trainer-run"}, "output_subdir": None}
OVERRIDES = ["optimizer=sgd", "optimizer.learning_rate=${seed}"]


def test_the_record_holds_what_composed_the_run_signed_and_marked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "alice"))
    run = tmp_path / "run"
    run.mkdir()
    record.write(run, CONFIG, ".hydra", HYDRA, OVERRIDES)
    folder = run / ".hydra"
    assert yaml_files.read(folder / "config.yaml") == {
        "optimizer": {"_target_": "trainer_run.optimizers.SGD", "learning_rate": "${seed}"},
        "seed": 3}  # unresolved, as Hydra records it
    assert yaml_files.read(folder / "overrides.yaml") == OVERRIDES
    hydra = yaml_files.read(folder / "hydra.yaml")["hydra"]
    assert hydra["output_subdir"] == ".hydra" and hydra["run"] == {"dir": "runs/x"}
    assert json.loads((folder / "trainer-run.json").read_text()) == {"tool": "trainer-run",
                                                                    "format": directory.FORMAT}
    signature = (folder / "config.sig").read_text().strip()
    assert trust.signed_by_me((folder / "config.yaml").read_bytes(), signature)
    assert directory.is_run(run)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "bob"))
    assert not trust.signed_by_me((folder / "config.yaml").read_bytes(), signature)


def test_another_record_folder_and_none(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "alice"))
    record.write(tmp_path / "a", CONFIG, "meta", HYDRA, OVERRIDES)
    assert sorted(p.name for p in (tmp_path / "a" / "meta").iterdir()) == [
        "config.sig", "config.yaml", "hydra.yaml", "overrides.yaml", "trainer-run.json"]
    assert yaml_files.read(tmp_path / "a" / "meta" / "hydra.yaml")["hydra"]["output_subdir"] == "meta"
    (tmp_path / "b").mkdir()
    record.write(tmp_path / "b", CONFIG, None, HYDRA, OVERRIDES)
    assert list((tmp_path / "b").iterdir()) == []
    assert not directory.is_run(tmp_path / "b")
