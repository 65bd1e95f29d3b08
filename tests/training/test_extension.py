"""The order of the extensions: Chainer's three priorities, then registration order. The
built-in extensions of a run (as ``cli/extend.py`` registers them) are called and finalized in
the order the run needs, and an extension registered later with the same priority runs after
them."""

from __future__ import annotations

import json

import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from trainer_run.compose.options import CONFIGS
from trainer_run.runner.build import build_trainer
from trainer_run.storage import checkpoint
from trainer_run.training import PRIORITY_EDITOR, PRIORITY_READER, PRIORITY_WRITER
from trainer_run.training.extensions import (
    EarlyStopping,
    Evaluator,
    HeldOutEvaluator,
    LogFinish,
    LogReport,
    MetricsTable,
    Objective,
    PlateauStep,
    ProfileReport,
    Progress,
    Snapshot,
    Summary,
)

BUILT_IN = (Evaluator, HeldOutEvaluator, PlateauStep, Objective, EarlyStopping, LogReport, Progress,
            MetricsTable, Snapshot, Summary, LogFinish, ProfileReport)
# What a run needs: the writers first, the plateau step and the objective before early stopping,
# the log before the progress line, the table after the bar, the snapshot after the log, the
# summary after the last checkpoint, the loggers' finish after the summary, the profile report last.
RUN_ORDER = ["evaluator", "held_out", "plateau_step", "objective", "early_stopping", "log_report",
             "progress", "metrics_table", "snapshot", "summary", "log_finish", "profile"]


def _record(monkeypatch, classes, calls: list) -> None:
    """Every call and finalize of an extension of ``classes`` appends ``(hook, name,
    iteration)`` to ``calls`` before it runs."""
    for cls in classes:
        for hook in ("__call__", "finalize"):
            original = getattr(cls, hook)

            def recorded(self, trainer, original=original, hook=hook):
                calls.append((hook, self.name, trainer.updater.iteration))
                return original(self, trainer)

            monkeypatch.setattr(cls, hook, recorded)


def _cli_config(tmp_path) -> dict:
    """A run with every built-in extension: a test split, a plateau schedule, early stopping
    and the profile; 4 iterations, each second one evaluated, logged and checkpointed."""
    rng = np.random.default_rng(0)
    for name, size in (("train", 60), ("test", 20)):
        np.savez(tmp_path / f"{name}.npz", x=rng.normal(size=(size, 3)).astype(np.float32),
                 y=np.arange(size) % 2)
    overrides = [f"dataset.path={tmp_path / 'train.npz'}", f"dataset.test_path={tmp_path / 'test.npz'}",
                 "dataset.batch_size=10", "scheduler=plateau", "trainer.early_stopping.patience=5",
                 "trainer.profile=true", "trainer.progress=false", "trainer.max_iterations=4",
                 "trainer.eval_interval=2", "trainer.log_interval=2", "trainer.checkpoint_interval=2"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("config", overrides=["dataset=npz", *overrides])
    return OmegaConf.to_container(cfg, resolve=True)


def test_the_cli_s_extensions_take_the_three_priorities(tmp_path):
    trainer = build_trainer(_cli_config(tmp_path), tmp_path / "run")
    priorities = {name: trainer.get_extension(name).priority for name in RUN_ORDER}
    assert priorities == {"evaluator": PRIORITY_WRITER, "held_out": PRIORITY_WRITER,
                          "plateau_step": PRIORITY_EDITOR, "objective": PRIORITY_EDITOR,
                          "early_stopping": PRIORITY_EDITOR, "log_report": PRIORITY_READER,
                          "progress": PRIORITY_READER, "metrics_table": PRIORITY_READER,
                          "snapshot": PRIORITY_READER, "summary": PRIORITY_READER,
                          "log_finish": PRIORITY_READER, "profile": PRIORITY_READER}


def test_a_cli_run_calls_and_finalizes_its_extensions_in_the_order_it_needs(tmp_path, monkeypatch):
    calls: list = []
    _record(monkeypatch, BUILT_IN, calls)
    out = tmp_path / "run"
    trainer = build_trainer(_cli_config(tmp_path), out)
    trainer.run()
    assert trainer.status == "completed"
    assert [name for hook, name, it in calls if hook == "__call__" and it == 4] == RUN_ORDER
    assert [name for hook, name, _ in calls if hook == "finalize"] == RUN_ORDER
    # what the order is for: the checkpoint of iteration 4 holds the log row of iteration 4,
    # the summary has the test split's metrics, the profile times every other finalize
    state = checkpoint.load(out / "checkpoints" / checkpoint.name_of(4))
    assert state["trainer"]["extensions"]["log_report"]["log"][-1]["iteration"] == 4
    assert "test/loss" in json.loads((out / "summary.json").read_text())
    assert (out / "profile.json").is_file()


def test_a_reader_registered_after_the_snapshot_runs_after_it(tmp_path, monkeypatch):
    """No built-in extension has a private number: a reader registered after the snapshot
    and the summary is called and finalized after them."""
    from tests.training.test_trainer import _trainer

    calls: list = []
    _record(monkeypatch, (Evaluator, LogReport, Snapshot, Summary), calls)
    trainer = _trainer(tmp_path, max_iterations=20)

    class Reader:
        name = "reader"

        def __call__(self, trainer):
            calls.append(("__call__", self.name, trainer.updater.iteration))

        def finalize(self, trainer):
            calls.append(("finalize", self.name, trainer.updater.iteration))

    trainer.extend(Reader())
    trainer.run()
    order = ["evaluator", "log_report", "snapshot", "summary", "reader"]
    assert [name for hook, name, it in calls if hook == "__call__" and it == 20] == order
    assert [name for hook, name, _ in calls if hook == "finalize"] == order
