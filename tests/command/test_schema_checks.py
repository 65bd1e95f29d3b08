"""The config checks (compose/schema.py) from the command line: a bad value stops
``trainer-run`` with one line before any training starts, a misspelt key stops a sweep before
any job, and checked overrides still train."""

from __future__ import annotations

import pytest
from helpers import one_error_line, run_cli


def test_the_command_refuses_a_schedule_reaching_zero_in_one_line(tmp_path):
    run = tmp_path / "run"
    line = one_error_line(run_cli(f"hydra.run.dir={run}", "trainer.progress=false", "optimizer=ftml",
                                   "scheduler=cosine", "trainer.max_iterations=20", cwd=tmp_path))
    assert line == ("error: optimizer.learning_rate must stay > 0 (d_t divides by it), but the "
                    "schedule ends at final_lr=0.0: set scheduler.final_lr > 0")
    assert not (run / "checkpoints").exists() and not (run / "metrics.jsonl").exists()


@pytest.mark.parametrize("arguments, message", [
    (["trainer.max_iteration=5"],
     "error: trainer.max_iteration is not a config key; did you mean trainer.max_iterations?"),
    (["optimizer.learning_rate=fast"], "error: optimizer.learning_rate must be a number, got 'fast'"),
    (["optimizer.beta1=1.0"], "error: optimizer.beta1 must be < 1, got 1.0"),
], ids=["misspelt", "wrong-type", "out-of-range"])
def test_the_command_stops_with_one_line_before_training(tmp_path, arguments, message):
    run = tmp_path / "run"
    line = one_error_line(run_cli(f"hydra.run.dir={run}", "trainer.progress=false", *arguments,
                                   cwd=tmp_path))
    assert line.startswith(message)
    assert not (run / "checkpoints").exists() and not (run / "metrics.jsonl").exists()
    if "config key" in message:  # refused before Hydra made the run directory
        assert not run.exists()


def test_a_misspelt_key_in_a_sweep_stops_before_any_job(tmp_path):
    result = run_cli("-m", "optimizer=adam,sgd", "optimizer.momentun=0.9",
                     f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert one_error_line(result) == (
        "error: optimizer.momentun is not a config key; did you mean optimizer.momentum?")
    assert not (tmp_path / "sweep").exists()


def test_checked_overrides_still_run_the_training(tmp_path):
    """The key check composes with Hydra in the same process; hydra.main runs afterwards."""
    run = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={run}", "trainer.progress=false", "optimizer=sgd",
                     "optimizer.momentum=0.9", "trainer.max_iterations=5", "trainer.log_interval=5",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (run / "metrics.jsonl").exists()


def test_an_objective_the_metrics_do_not_measure_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", "objective.metric=val/f1_macro", "objective.mode=max",
                     "dataset.size=200", "trainer.max_iterations=6", "trainer.eval_interval=3")
    assert one_error_line(result) == ("error: objective.metric=val/f1_macro is not measured: the "
                                      "run's metrics do not include f1_macro; add "
                                      "metrics=[f1_macro]")
    assert not out.exists()
