"""runner/extend.py, in-process: which extensions a run's config registers (on rank 0 and on
the other ranks), the user's callbacks (by name, first, never under one of our names), and the
iterations the intervals make them act at, read from what a short run wrote."""

from __future__ import annotations

import json

import pytest

from tests.runner.test_build import config
from trainer_run.errors import ConfigError
from trainer_run.runner import build, extend
from trainer_run.schedulers import ReduceOnPlateauScheduler
from trainer_run.training import Trainer
from trainer_run.training.extensions import EarlyStopping, PlateauStep
from trainer_run.updaters import StandardUpdater

WRITERS = {"log_report", "progress", "metrics_table", "snapshot", "summary", "log_finish"}
"""Our extensions that write, on rank 0 alone."""
SHORT = ("trainer.max_epochs=null", "trainer.max_iterations=11", "trainer.progress=false")


def registered(trainer: Trainer) -> set[str]:
    """The names of ``trainer``'s extensions among :data:`extend.OURS` and ``mine``."""
    found = set()
    for name in (*extend.OURS, "mine"):
        try:
            trainer.get_extension(name)
        except KeyError:
            continue
        found.add(name)
    return found


def rows(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_default_run_evaluates_follows_its_objective_and_writes_on_rank_0(tmp_path):
    trainer = build.build_trainer(config(), tmp_path / "run")
    assert registered(trainer) == {"evaluator", "objective", *WRITERS}


def test_early_stopping_a_plateau_schedule_and_the_profile_add_theirs(tmp_path):
    trainer = build.build_trainer(config("trainer.early_stopping.patience=3",
                                         "trainer.early_stopping.min_delta=0.01", "scheduler=plateau",
                                         "trainer.profile=true"), tmp_path / "run")
    assert registered(trainer) == {"evaluator", "objective", "early_stopping", "plateau_step",
                                   "profile", *WRITERS}
    stopping, step = trainer.get_extension("early_stopping"), trainer.get_extension("plateau_step")
    assert type(stopping) is EarlyStopping and (stopping.patience, stopping.min_delta) == (3, 0.01)
    assert stopping.objective is trainer.get_extension("objective")
    assert type(step) is PlateauStep and type(step.scheduler) is ReduceOnPlateauScheduler


class SecondRank(StandardUpdater):
    """An updater of rank 1 of a multi-process run."""

    @property
    def rank(self) -> int:
        return 1


def test_a_rank_other_than_0_evaluates_and_follows_the_objective_but_writes_nothing(tmp_path):
    cfg = config("+callbacks.mine._target_=" + f"{__name__}.StopAt", "+callbacks.mine.iteration=3")
    run = build.build_run(cfg)
    trainer = Trainer(SecondRank(run.iterator, run.optimizer, run.model), run.stop,
                      out=str(tmp_path / "run"))
    extend.extend(trainer, run, cfg, None)
    assert registered(trainer) == {"mine", "evaluator", "objective"}


class StopAt:
    """A user's callback: asks the run to stop at ``iteration``; it is given the run's info."""

    def __init__(self, iteration: int, run):
        self.iteration, self.run = iteration, run

    def __call__(self, trainer) -> None:
        if trainer.updater.iteration == self.iteration:
            trainer.request_stop("enough")


def test_a_users_callback_is_registered_by_name_and_its_stop_is_that_iterations(tmp_path):
    out = tmp_path / "run"
    cfg = config(*SHORT, f"+callbacks.mine._target_={__name__}.StopAt", "+callbacks.mine.iteration=3",
                 "+callbacks.gone=null", "trainer.log_interval=4")
    trainer = build.build_trainer(cfg, out)
    assert registered(trainer) == {"mine", "evaluator", "objective", *WRITERS}
    assert trainer.get_extension("mine").callback.run.config["seed"] == cfg["seed"]
    trainer.run()
    assert [row["iteration"] for row in rows(out)] == [3]  # the stop's row, at the stop
    assert sorted(p.name for p in (out / "checkpoints").glob("iter_*")) == ["iter_00000003"]
    assert json.loads((out / "summary.json").read_text())["iteration"] == 3


@pytest.mark.parametrize("name", ["evaluator", "snapshot", "ema"])
def test_a_callback_under_one_of_our_names_is_refused(tmp_path, name):
    cfg = config(f"+callbacks.{name}._target_={__name__}.StopAt", f"+callbacks.{name}.iteration=3")
    with pytest.raises(ConfigError) as info:
        build.build_trainer(cfg, tmp_path / "run")
    assert str(info.value) == (
        f"callbacks.{name}: {name} is the name of one of trainer-run's own extensions (evaluator, "
        "plateau_step, objective, early_stopping, held_out, log_report, progress, metrics_table, "
        f"snapshot, summary, log_finish, profile, ema, swa); name your callback otherwise")
    assert not (tmp_path / "run").exists()


def test_the_log_evaluation_and_checkpoints_act_at_their_intervals_and_at_the_last_iteration(
        tmp_path):
    """Log rows every 4 iterations and at each evaluation (every 5, and the last); checkpoints
    every 3, at the last, and at each evaluation that is the best so far (the objective's)."""
    out = tmp_path / "run"
    trainer = build.build_trainer(config(*SHORT, "trainer.log_interval=4", "trainer.eval_interval=5",
                                         "trainer.checkpoint_interval=3",
                                         "trainer.keep_checkpoints=null"), out)
    trainer.run()
    logged = rows(out)
    assert [row["iteration"] for row in logged] == [4, 5, 8, 10, 11]
    evaluated = [(row["iteration"], row["val/loss"]) for row in logged if "val/loss" in row]
    assert [iteration for iteration, _ in evaluated] == [5, 10, 11]
    bests = [i for n, (i, loss) in enumerate(evaluated) if all(loss < b for _, b in evaluated[:n])]
    assert sorted(p.name for p in (out / "checkpoints").glob("iter_*")) == [
        f"iter_{i:08d}" for i in sorted({3, 6, 9, 11, *bests})]
    assert 5 in bests  # the first evaluation is the first best
