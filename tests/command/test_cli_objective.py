"""The objective from the command line: best checkpoint, early stopping and why a run stopped,
on a dataset built to overfit (pure-noise labels, 40 training examples), whose validation loss
is lowest at iteration 20 and rises after it."""

import json

import numpy as np
import pytest
from helpers import run_cli

EVERY = 10


@pytest.fixture(scope="module")
def noise(tmp_path_factory):
    folder = tmp_path_factory.mktemp("noise")
    rng = np.random.default_rng(0)
    np.savez(folder / "train.npz", x=rng.normal(size=(40, 8)).astype("float32"),
             y=rng.integers(0, 2, 40))
    np.savez(folder / "val.npz", x=rng.normal(size=(200, 8)).astype("float32"),
             y=rng.integers(0, 2, 200))
    return folder


def _args(noise, out, *more):
    return ["dataset=npz", f"dataset.path={noise / 'train.npz'}",
            f"dataset.val_path={noise / 'val.npz'}", "dataset.batch_size=20",
            "optimizer.learning_rate=0.001", "trainer.max_iterations=300",
            f"trainer.eval_interval={EVERY}", f"trainer.log_interval={EVERY}",
            "trainer.checkpoint_interval=1000", "trainer.progress=false", f"hydra.run.dir={out}", *more]


def _val_losses(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [(row["iteration"], row["val/loss"]) for row in rows]


@pytest.fixture(scope="module")
def stopped(noise, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "stopped"
    result = run_cli(*_args(noise, out, "trainer.early_stopping.patience=3"))
    assert result.returncode == 0, result.stderr
    return out


def test_best_checkpoint_and_early_stopping_follow_the_logged_validation_loss(stopped):
    losses = _val_losses(stopped)
    best_iteration, best = min(losses, key=lambda row: row[1])
    # by hand from the log: patience 3 stops at the third evaluation after the best one
    assert best_iteration == 20 and losses[-1][0] == best_iteration + 3 * EVERY
    summary = json.loads((stopped / "summary.json").read_text())
    assert summary["stop_reason"] == "early_stopping" and summary["iteration"] == 50
    assert summary["objective"] == {"metric": "val/loss", "mode": "min", "best": best,
                                    "best_iteration": 20, "final": losses[-1][1]}
    kept = stopped / "checkpoints"
    assert (kept / "best").read_text().strip() == "iter_00000020"
    assert (kept / "iter_00000020").is_dir() and (kept / "latest").read_text().strip() == "iter_00000050"


def test_model_best_holds_the_parameters_of_the_best_iteration(noise, stopped, tmp_path):
    """The same run stopped by its limit at iteration 20 ends with the same parameters."""
    short = tmp_path / "short"
    result = run_cli(*_args(noise, short, "trainer.max_iterations=20"))
    assert result.returncode == 0, result.stderr
    best, reference = np.load(stopped / "model_best.npz"), np.load(short / "model.npz")
    assert sorted(best.files) == sorted(reference.files)
    for name in best.files:
        np.testing.assert_array_equal(best[name], reference[name])
    summary = json.loads((short / "summary.json").read_text())
    assert summary["stop_reason"] == "max_iterations"


def test_an_early_stopped_run_resumed_with_a_larger_budget_keeps_its_stopping_state(
        noise, stopped, tmp_path):
    import shutil

    for patience, stops_at in ((3, 60), (5, 70)):
        run = tmp_path / f"p{patience}"
        shutil.copytree(stopped, run)
        result = run_cli(f"resume={run}", "trainer.max_iterations=300",
                         f"trainer.early_stopping.patience={patience}", "trainer.progress=false")
        assert result.returncode == 0, result.stderr
        summary = json.loads((run / "summary.json").read_text())
        assert (summary["iteration"], summary["stop_reason"]) == (stops_at, "early_stopping")
        assert summary["objective"]["best_iteration"] == 20


def test_max_mode_objective_and_max_epochs_stop_reason(noise, tmp_path):
    out = tmp_path / "acc"
    result = run_cli(*_args(noise, out, "objective.metric=val/accuracy", "objective.mode=max",
                            "trainer.max_iterations=null", "trainer.max_epochs=3"))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    best = max(rows, key=lambda row: row["val/accuracy"])  # first of equal values wins
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "max_epochs"
    assert summary["objective"]["best"] == best["val/accuracy"]
    assert summary["objective"]["best_iteration"] == best["iteration"]


def test_an_objective_that_never_appears_names_the_metrics_that_do(noise, tmp_path):
    result = run_cli(*_args(noise, tmp_path / "bad", "objective.metric=val/acc"))
    assert result.returncode == 2
    assert "objective.metric=val/acc is not among the metrics of this run" in result.stderr
    assert "val/accuracy, val/loss" in result.stderr and "Traceback" not in result.stderr
