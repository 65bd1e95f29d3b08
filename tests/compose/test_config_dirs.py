"""The config folders a run was composed from (compose/config_dirs.py): without a record of the folder,
the option file is named."""

from __future__ import annotations

import pytest

from trainer_run.compose import config_dirs
from trainer_run.errors import ConfigError


def test_without_a_record_of_the_folder_the_option_file_is_named(tmp_path):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "hydra.yaml").write_text("hydra: {runtime: {config_sources: []}}\n")
    for run in (tmp_path, None):
        with pytest.raises(ConfigError) as e:
            config_dirs.check_found({"optimizer": "adam", "model": "mine"}, ["resume=x y"], run)
        assert str(e.value) == ("the run chose model=mine from a config folder of yours, which this "
                                "command does not give; resume it with: trainer-run --config-dir "
                                "DIR resume='x y', DIR being your folder that holds model/mine.yaml")
    config_dirs.check_found({"optimizer": "adam", "model": "mlp"}, [], None)
