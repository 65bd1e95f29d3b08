"""plot.png's title gives the learning rate the run starts from: the schedule's ``base_lr``
when there is a schedule (it owns the rate), else ``optimizer.learning_rate``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import read_jsonl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import trainer_run
from trainer_run.training.loggers import plot_layout as layout
from trainer_run.training.loggers.base import RunInfo

CONFIGS = Path(__file__).resolve().parent.parent.parent.parent / "configs"
OUT = Path("runs/2026-11-21/10-53-00")


def _resolved(*overrides) -> dict:
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return OmegaConf.to_container(compose("config", overrides=list(overrides)), resolve=True)


def _rate_in_title(config: dict) -> str | None:
    words = layout.title(OUT, config).splitlines()[-1].split()
    return next((w.removeprefix("lr=").rstrip(",") for w in words if w.startswith("lr=")), None)


@pytest.mark.parametrize("overrides, rate", [
    (("optimizer.learning_rate=0.1", "scheduler.base_lr=0.05"), "0.05"),
    (("scheduler.base_lr=0.05",), "0.05"),
    (("scheduler=cosine", "optimizer.learning_rate=0.1", "scheduler.base_lr=0.03"), "0.03"),
    (("scheduler=factor", "scheduler.step=10", "optimizer=sgd", "scheduler.base_lr=0.2"), "0.2"),
    (("optimizer.learning_rate=0.2",), "0.2"),  # base_lr follows optimizer.learning_rate
    (("~scheduler", "optimizer.learning_rate=0.2"), "0.2"),  # no schedule: the optimizer's
])
def test_the_title_gives_the_rate_of_the_section_that_owns_it(overrides, rate):
    assert _rate_in_title(_resolved(*overrides)) == rate


def test_a_schedule_without_base_lr_leaves_the_rate_out():
    config = {"optimizer": {"_target_": "trainer_run.optimizers.SGD", "learning_rate": 0.1},
              "scheduler": {"_target_": "my.Schedule"}}
    assert _rate_in_title(config) is None


def test_the_figure_s_title_gives_the_rate_the_run_logs(tmp_path):
    """A run whose schedule starts at 0.05 beside optimizer.learning_rate=0.1 logs lr 0.05, and
    plot.png's title (drawn from the same config) says lr=0.05."""
    pytest.importorskip("matplotlib")
    from trainer_run.training.loggers.plot import Plot

    overrides = ("optimizer.learning_rate=0.1", "scheduler.base_lr=0.05", "trainer.max_iterations=20",
                 "trainer.log_interval=10", "trainer.progress=false", "logger=[jsonl,plot]")
    run = tmp_path / "run"
    trainer_run.train(overrides, run_dir=run)
    assert (run / "plot.png").read_bytes()[:4] == b"\x89PNG"
    logged = {row["lr"] for row in read_jsonl(run / "metrics.jsonl") if "lr" in row}
    assert logged == {0.05}
    plot = Plot(run=RunInfo(_resolved(*overrides)))
    plot.start(run, read_jsonl(run / "metrics.jsonl"))
    title = plot.figure().get_suptitle()
    assert title.splitlines()[1].startswith("MLP on spirals, Adam lr=0.05, seed 0"), title
