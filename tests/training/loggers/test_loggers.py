"""The loggers in this process: the plot leaves matplotlib's backend and pyplot alone, the
config's ``logger`` section chooses the files, TensorBoard on a full disk is one error naming
its event file (the ``logger`` group from the command line: tests/command/test_loggers.py)."""

from __future__ import annotations

import math
import os
import sys

import pytest


def test_drawing_leaves_matplotlib_s_backend_and_pyplot_alone(tmp_path):
    import matplotlib

    before, had_pyplot = matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules
    from trainer_run.training.loggers.plot import Plot

    plot = Plot(dpi=50)
    plot.start(tmp_path, [{"iteration": 1, "lr": 0.1, "train/loss": 1.0}])
    plot.write({"iteration": 2, "lr": 0.001, "train/loss": math.nan, "val/loss": 0.5})
    assert matplotlib.get_backend() == before
    assert ("matplotlib.pyplot" in sys.modules) == had_pyplot
    assert matplotlib.image.imread(tmp_path / "plot.png").shape[:2] == (2 * 125 + 30, 400)  # loss, lr
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]  # no temporary file left


@pytest.mark.parametrize("sections, files", [
    (None, {"metrics.jsonl"}),  # a config from before the logger group: metrics.jsonl, as then
    ({"csv": {"_target_": "trainer_run.training.loggers.csv.CsvTable", "delimiter": ";"}},
     {"metrics.csv"}),
])
def test_the_config_s_logger_section_chooses_the_files(tmp_path, sections, files):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from trainer_run.compose.options import CONFIGS
    from trainer_run.runner.build import build_trainer

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("config", overrides=["trainer.max_iterations=4", "trainer.log_interval=2",
                                           "trainer.progress=false", "dataset.size=200"])
    config = OmegaConf.to_container(cfg, resolve=True)
    del config["logger"]
    if sections is not None:
        config["logger"] = sections
    build_trainer(config, tmp_path).run()
    logged = {p.name for p in tmp_path.iterdir() if p.name.startswith(("metrics", "plot", "tensor"))}
    assert logged == files
    if sections is not None:
        assert (tmp_path / "metrics.csv").read_text().splitlines()[0].startswith("iteration;epoch;time;")


def test_tensorboard_on_a_full_disk_is_one_error_naming_the_event_file(tmp_path, monkeypatch, capfd):
    import errno

    from trainer_run.errors import StorageError
    from trainer_run.training.loggers.tensorboard import TensorBoard

    logger = TensorBoard()
    logger.start(tmp_path, [{"iteration": 1, "train/loss": 0.5}])
    before = logger.path.read_bytes()
    real = os.write

    def write(fd, data):
        if "tfevents" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(StorageError) as caught:
        logger.write({"iteration": 2, "train/loss": 0.4})
    assert str(caught.value) == f"cannot write {logger.path}: No space left on device"
    assert logger.path.read_bytes() == before  # the row's events whole or not at all
    logger.close()
    assert "Traceback" not in capfd.readouterr().err
