"""The config ``trainer-run`` composes, composed from Python: Hydra's compose over the same
search path as the command (Hydra's own configs, ours, then each ``--config-dir`` of the
user's, as ``hydra.main`` orders them), with Hydra's node filled in as a job of the command
sees it (its output directory and the current folder) and set as the current
:class:`~hydra.core.hydra_config.HydraConfig`, so that a config's ``${hydra:...}`` resolves
as it does in the command.

Hydra's compose API (``initialize_config_dir``) cannot add a config folder beside its
primary one, which ``--config-dir`` does; this module builds the search path as
``hydra.main`` does instead, with Hydra 1.3's ``create_config_search_path``.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from hydra import version
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.config_search_path import SearchPathQuery
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict, read_write

APP = "trainer-run"
VERSION_BASE = "1.3"  # the command's hydra.main(version_base=...)
AS_A_RUN = ("hydra.output_subdir=null", "hydra.mode=RUN")
"""What the command's Hydra adds to a run's overrides (our record is written by
:mod:`trainer_run.runs.record`, not Hydra's)."""


def compose(overrides: list[str], config_dirs: list[Path], output_dir: Path) -> DictConfig:
    """The whole config (``hydra`` included) of a run of ``overrides`` into ``output_dir``,
    with the options of each of ``config_dirs`` beside ours. Hydra's errors propagate."""
    search_path = create_config_search_path("pkg://trainer_run.configs")
    for folder in config_dirs:
        search_path.prepend(provider="command-line", path=f"file://{Path(folder).absolute()}",
                            anchor=SearchPathQuery(provider="schema"))
    version.setbase(VERSION_BASE)
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2(task_name=APP, config_search_path=search_path)
    try:
        cfg = hydra.compose_config("config", [*overrides, *AS_A_RUN], run_mode=RunMode.RUN, from_shell=False,
                                   with_log_configuration=False)
    finally:
        GlobalHydra.instance().clear()
    with open_dict(cfg.hydra.runtime):
        cfg.hydra.runtime.output_dir = str(Path(output_dir).absolute())
        cfg.hydra.runtime.cwd = os.getcwd()
    HydraConfig.instance().set_config(cfg)
    return cfg


def task(cfg: DictConfig) -> DictConfig:
    """The run's own config: ``cfg`` without Hydra's node, as a job of the command gets it."""
    job = copy.deepcopy(cfg)
    with read_write(job), open_dict(job):
        del job["hydra"]
    return job
