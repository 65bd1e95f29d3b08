"""trainer_run.runner.closing: the last lines of a run (stopped early and why, where an
interrupted or timed-out run stopped and how to resume it), the checkpoint a stopped run keeps,
and the line of a resumed run with nothing left to do. The trainer is a stand-in holding what
these functions read, with the library's own stop trigger and early stopping."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from trainer_run.runner import closing
from trainer_run.storage import checkpoint
from trainer_run.training.extensions.objective import EarlyStopping, Objective
from trainer_run.training.triggers import StopTrigger


class Updater:
    def __init__(self, iteration: int, epoch_detail: float):
        self.iteration, self.epoch_detail, self.finalized = iteration, epoch_detail, 0

    def finalize(self) -> None:
        self.finalized += 1


def trainer(status="completed", stop_reason=None, iteration=120, epoch=1.5, max_iterations=1000,
            max_epochs=None, stopping=None, max_time=None):
    """What the functions read of a Trainer: its status and stop reason, its updater's place,
    its stop trigger, its extensions by name and its time limit."""
    return SimpleNamespace(status=status, stop_reason=stop_reason, updater=Updater(iteration, epoch),
                           stop_trigger=StopTrigger(max_iterations, max_epochs), max_time=max_time,
                           get_extension={"early_stopping": stopping}.__getitem__)


def early_stopping(best=None, best_iteration=None, patience=3, min_delta=0.01):
    objective = Objective("val/loss", "min", at=lambda t: True)
    objective.best, objective.best_iteration = best, best_iteration
    return EarlyStopping(objective, patience=patience, min_delta=min_delta)


def with_checkpoint(run: Path, iteration: int) -> Path:
    """A run folder holding one checkpoint of ``iteration``; returns the checkpoint's path."""
    checkpoint.save({"trainer": {"iteration": iteration}}, run / "checkpoints", iteration, run=run)
    return run / "checkpoints" / f"iter_{iteration:08d}"


def test_a_run_stopped_by_early_stopping_says_where_and_why():
    run = trainer(stop_reason="early_stopping", iteration=120, epoch=1.5,
                  stopping=early_stopping(best=0.123456789, best_iteration=80))
    assert closing.stopped_early(run) == (
        "stopped early after iteration 120 (epoch 1.50), before trainer.max_iterations=1000: "
        "early stopping, val/loss did not improve by more than trainer.early_stopping.min_delta=0.01 "
        "in trainer.early_stopping.patience=3 evaluations in a row; best val/loss 0.123457 at "
        "iteration 80")


def test_early_stopping_without_a_best_value_names_none():
    run = trainer(stop_reason="early_stopping", iteration=30, epoch=0.25, max_iterations=None,
                  max_epochs=2, stopping=early_stopping(patience=1, min_delta=0))
    assert closing.stopped_early(run) == (
        "stopped early after iteration 30 (epoch 0.25), before trainer.max_epochs=2: early "
        "stopping, val/loss did not improve by more than trainer.early_stopping.min_delta=0 in "
        "trainer.early_stopping.patience=1 evaluations in a row")


def test_a_run_a_callback_stopped_says_its_reason_and_both_limits():
    run = trainer(stop_reason="target accuracy reached", iteration=7, epoch=0.125,
                  max_iterations=500, max_epochs=2.5)
    assert closing.stopped_early(run) == (
        "stopped early after iteration 7 (epoch 0.12), before trainer.max_iterations=500 or "
        "trainer.max_epochs=2.5: a callback asked to stop (target accuracy reached)")


@pytest.mark.parametrize("status, reason", [
    ("completed", "max_iterations"), ("completed", "max_epochs"), ("completed", "stop_trigger"),
    ("completed", "max_time"), ("completed", None), ("interrupted", "early_stopping"),
    ("interrupted", "a callback's reason"), ("failed", "a callback's reason")])
def test_no_early_line_for_a_run_its_limits_stopped_or_that_did_not_complete(status, reason):
    assert closing.stopped_early(trainer(status, reason, stopping=early_stopping())) is None


def test_a_run_without_a_stop_reason_attribute_did_not_stop_early():
    run = trainer()
    del run.stop_reason
    assert closing.stopped_early(run) is None


def test_kept_names_the_last_good_checkpoint_and_how_to_resume(tmp_path):
    run = tmp_path / "run"
    with_checkpoint(run, 10)
    last = with_checkpoint(run, 20)
    assert closing.kept(run) == f"The last good checkpoint is {last}; resume={run} continues from it"


def test_kept_without_a_checkpoint_says_so(tmp_path):
    assert closing.kept(tmp_path) == "No checkpoint was written before it"
    (tmp_path / "checkpoints").mkdir()
    assert closing.kept(tmp_path) == "No checkpoint was written before it"
    assert closing.kept(tmp_path / "never made") == "No checkpoint was written before it"


def test_after_error_with_a_checkpoint_continues_from_it(tmp_path):
    last = with_checkpoint(tmp_path, 500)
    assert closing.after_error(tmp_path) == (
        f"The last good checkpoint is {last}; once it is fixed, resume={tmp_path} continues from it")
    assert closing.after_error(tmp_path, sweeping=True) == (
        f"The last good checkpoint is {last}; once it is fixed, the same sweep run again continues it")


def test_after_error_without_a_checkpoint_starts_again(tmp_path):
    assert closing.after_error(tmp_path) == (
        f"No checkpoint was written before it; once it is fixed, resume={tmp_path} starts the run "
        "again")
    assert closing.after_error(tmp_path, sweeping=True) == (
        "No checkpoint was written before it; once it is fixed, the same sweep run again continues it")


def test_nothing_to_do_says_where_the_run_is_and_finishes_the_updater(capsys):
    run = trainer(iteration=1000, epoch=2.5, max_iterations=1000, max_epochs=2.5)
    closing.nothing_to_do(run)
    assert capsys.readouterr() == (
        "nothing to do: the run is at iteration 1000 (epoch 2.50), which reaches "
        "trainer.max_iterations=1000 or trainer.max_epochs=2.5; raise the limit to train further\n",
        "")
    assert run.updater.finalized == 1


def test_nothing_to_do_prints_nothing_off_rank_0(capsys):
    run = trainer(iteration=40, epoch=4.0, max_iterations=40)
    closing.nothing_to_do(run, rank_0=False)
    assert capsys.readouterr() == ("", "")
    assert run.updater.finalized == 1


def test_last_lines_of_a_completed_run_are_its_directory(tmp_path, capsys):
    with_checkpoint(tmp_path, 50)
    closing.last_lines(trainer(stop_reason="max_iterations"), tmp_path)
    assert capsys.readouterr() == (f"run directory: {tmp_path}\n", "")


def test_last_lines_of_an_early_stopped_run_say_so_first(tmp_path, capsys):
    closing.last_lines(trainer(stop_reason="good enough", iteration=3, epoch=0.5), tmp_path)
    assert capsys.readouterr().out == (
        "stopped early after iteration 3 (epoch 0.50), before trainer.max_iterations=1000: a "
        f"callback asked to stop (good enough)\nrun directory: {tmp_path}\n")


def test_last_lines_of_an_interrupted_run_say_how_to_resume(tmp_path, capsys):
    last = with_checkpoint(tmp_path, 60)
    closing.last_lines(trainer("interrupted", iteration=61), tmp_path, command="mpiexec -n 2 trainer-run")
    assert capsys.readouterr() == (
        f"run directory: {tmp_path}\ninterrupted at iteration 61; checkpoint {last}\n"
        f"resume with: mpiexec -n 2 trainer-run resume={tmp_path}\n", "")


def test_the_resume_line_quotes_a_directory_with_spaces(tmp_path, capsys):
    run = tmp_path / "my runs" / "it's"
    last = with_checkpoint(run, 5)
    closing.last_lines(trainer("interrupted", iteration=5), run)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [f"interrupted at iteration 5; checkpoint {last}",
                         f"""resume with: trainer-run resume='"{tmp_path}/my runs/it'"'"'s"'"""]


def test_last_lines_of_a_timed_out_run_name_the_limit_and_the_next_session(tmp_path, capsys):
    last = with_checkpoint(tmp_path, 300)
    run = trainer(stop_reason="max_time", iteration=300, epoch=3.75, max_time=90061.0)
    closing.last_lines(run, tmp_path)
    assert capsys.readouterr().out.splitlines() == [
        f"run directory: {tmp_path}",
        "time limit reached: trainer.max_time=90061 s (01:01:01:01) of training in this session, "
        f"stopped after iteration 300 (epoch 3.75); checkpoint {last}",
        f"resume with: trainer-run resume={tmp_path}",
        "(the resumed session may train for trainer.max_time again, counted from its start; add "
        "trainer.max_time=<seconds or DD:HH:MM:SS> to change that, or trainer.max_time=null to "
        "train to the run's iteration or epoch limit)"]


@pytest.mark.parametrize("status, reason", [("interrupted", None), ("completed", "max_time")])
def test_last_lines_of_a_sweep_or_without_a_checkpoint_are_the_directory(tmp_path, capsys, status,
                                                                         reason):
    closing.last_lines(trainer(status, reason, max_time=60.0), tmp_path)
    assert capsys.readouterr().out == f"run directory: {tmp_path}\n"
    with_checkpoint(tmp_path, 9)
    closing.last_lines(trainer(status, reason, max_time=60.0), tmp_path, sweeping=True)
    assert capsys.readouterr().out == f"run directory: {tmp_path}\n"


def test_a_run_from_python_says_how_to_resume_it_from_python(tmp_path, capsys):
    last = with_checkpoint(tmp_path, 4)
    closing.last_lines(trainer("interrupted", iteration=4), tmp_path, command=closing.PYTHON)
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"interrupted at iteration 4; checkpoint {last}",
        f"resume with: trainer_run.resume({str(tmp_path)!r})"]
