"""The results table of a sweep: run folders read into rows, ranked by each run's objective,
the varying and common overrides, groups across seeds, and the CSV, Markdown and rich output."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from trainer_run import results


def _summary(best, *, mode="min", metric="val/loss", overrides=(), status="completed",
             stop_reason="max_iterations", error=None, elapsed=12.3, **metrics) -> dict:
    summary = {
        "iteration": 1000, "epoch": 3.2, "elapsed_s": elapsed, "samples_per_s": 800.0,
        "status": status, "stop_reason": stop_reason,
        "objective": {"metric": metric, "mode": mode, "best": best,
                      "best_iteration": None if best is None else 750, "final": best},
        "overrides": list(overrides),
        "model": {"class": "MLP", "parameters": 1234, "bytes": 4936, "layers": {"l1": 10}},
        **{key.replace("__", "/"): value for key, value in metrics.items()},
    }
    if error is not None:
        summary["error"] = error
    return summary


def _failed(error: str, overrides=()) -> dict:
    return {"status": "failed", "stop_reason": "failed", "error": error, "overrides": list(overrides),
            "objective": {"metric": "val/loss", "mode": "min", "best": None, "best_iteration": None,
                          "final": None},
            "iteration": 0, "elapsed_s": 0}


def _sweep(root: Path, summaries: list[dict], name: str = "sweep") -> Path:
    sweep = root / name
    for i, summary in enumerate(summaries):
        (sweep / str(i)).mkdir(parents=True)
        (sweep / str(i) / "summary.json").write_text(json.dumps(summary))
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    return sweep


def _four(tmp_path, mode="min", bests=(0.5, 0.2, None, 0.3)) -> Path:
    summaries = []
    for i, best in enumerate(bests):
        lr = f"optimizer.learning_rate={10.0 ** -i}"
        overrides = ["trainer.max_iterations=200", lr]
        if best is None:
            summaries.append(_failed("loss went to the moon", overrides))
        else:
            summaries.append(_summary(best, mode=mode, overrides=overrides, val__loss=best,
                                      val__accuracy=1 - best, train__loss=best / 2, test__accuracy=0.9))
    return _sweep(tmp_path, summaries)


def test_rank_min_puts_the_lowest_best_first_and_runs_without_one_last(tmp_path):
    rows = results.rank(results.collect([_four(tmp_path)]))
    assert [row.job for row in rows] == ["1", "3", "0", "2"]
    assert [row.best for row in rows] == [0.2, 0.3, 0.5, None]
    assert rows[-1].status == "failed" and rows[-1].error == "loss went to the moon"
    assert rows[0].metrics == {"train/loss": 0.1, "val/loss": 0.2, "val/accuracy": 0.8,
                               "test/accuracy": 0.9}
    assert rows[0].status == "max_iterations" and rows[0].best_iteration == 750


def test_rank_max_puts_the_highest_best_first_and_ties_keep_job_order(tmp_path):
    sweep = _four(tmp_path, mode="max", bests=(0.5, 0.9, None, 0.9, 0.1))
    rows = results.rank(results.collect([sweep]))
    assert [row.job for row in rows] == ["1", "3", "0", "4", "2"]


def test_varying_and_common_overrides(tmp_path):
    summaries = [_summary(0.1, overrides=["optimizer=adam", "+trainer.max_iterations=200", "seed=1"]),
                 _summary(0.2, overrides=["optimizer=sgd", "+trainer.max_iterations=200", "seed=1"]),
                 _summary(0.3, overrides=["optimizer=sgd", "+trainer.max_iterations=200"])]
    rows = results.collect([_sweep(tmp_path, summaries)])
    assert results.varying(rows) == ["optimizer", "seed"]
    assert results.common(rows) == ["+trainer.max_iterations=200"]
    assert results.override_key("~model.dropout") == "model.dropout"
    assert results.override_key("+a.b=c=d") == "a.b"


def test_seed_groups_hold_the_mean_and_sample_std_ranked_by_mean(tmp_path):
    bests = {"adam": [0.30, 0.34, 0.29], "sgd": [0.21, 0.25, 0.20]}
    summaries = [_summary(best, overrides=[f"optimizer={name}", f"seed={seed}"])
                 for name, values in bests.items() for seed, best in enumerate(values)]
    sweep = _sweep(tmp_path, summaries)
    rows = results.collect([sweep])
    groups = results.by_seed(rows)
    assert [g.overrides for g in groups] == [["optimizer=sgd"], ["optimizer=adam"]]
    for group, name in zip(groups, ["sgd", "adam"]):
        assert group.n == 3 and group.seeds == ["0", "1", "2"]
        assert group.mean == pytest.approx(statistics.mean(bests[name]), rel=1e-12)
        assert group.std == pytest.approx(statistics.stdev(bests[name]), rel=1e-12)

    results.write(rows, sweep)
    with open(sweep / "results_by_seed.csv", newline="") as f:
        lines = list(csv.DictReader(f))
    assert [line["overrides"] for line in lines] == ["optimizer=sgd", "optimizer=adam"]
    assert float(lines[0]["mean"]) == statistics.mean(bests["sgd"])
    assert float(lines[1]["std"]) == statistics.stdev(bests["adam"])
    assert lines[0]["n"] == "3" and lines[0]["seeds"] == "0 1 2"
    assert "across seeds: mean ± std of best val/loss" in (sweep / "results.md").read_text()


def test_seed_groups_max_mode_and_no_grouping_without_repeated_seeds(tmp_path):
    summaries = [_summary(0.9, mode="max", overrides=["a=1", "seed=0"]),
                 _summary(0.7, mode="max", overrides=["a=1", "seed=1"]),
                 _summary(0.85, mode="max", overrides=["a=2", "seed=0"])]
    groups = results.by_seed(results.collect([_sweep(tmp_path, summaries)]))
    assert [(g.overrides, g.n) for g in groups] == [(["a=2"], 1), (["a=1"], 2)]
    assert groups[0].std is None and groups[1].mean == pytest.approx(0.8)
    single = [_summary(0.1, overrides=["a=1", "seed=0"]), _summary(0.2, overrides=["a=2", "seed=0"])]
    assert results.by_seed(results.collect([_sweep(tmp_path, single, "other")])) == []


def test_runs_that_did_not_finish_are_listed_below_and_left_out_of_the_seed_statistics(tmp_path):
    sweep = _sweep(tmp_path, [_summary(0.5, overrides=["seed=0"]),
                              _summary(0.1, overrides=["seed=1"], status="interrupted",
                                       stop_reason="interrupted"),
                              _summary(0.3, overrides=["seed=2"], status="diverged",
                                       stop_reason="diverged")])
    rows = results.rank(results.collect([sweep]))
    assert [(row.job, row.status) for row in rows] == [("2", "diverged"), ("0", "max_iterations"),
                                                       ("1", "interrupted")]
    group, = results.by_seed(rows)
    assert (group.n, group.mean, group.seeds) == (2, 0.4, ["0", "1", "2"])


def test_labels_name_the_varying_overrides_and_tell_equal_ones_apart():
    rows = [results.Row("0", Path("a"), ["optimizer=adam", "seed=1"]),
            results.Row("1", Path("b"), ["optimizer=sgd", "seed=1"]),
            results.Row("0", Path("c"), ["optimizer=sgd", "seed=2"]),
            results.Row("x", Path("d"), ["optimizer=sgd", "seed=2"])]
    assert results.labels(rows) == ["optimizer=adam seed=1", "optimizer=sgd seed=1",
                                    "0: optimizer=sgd seed=2", "x: optimizer=sgd seed=2"]
    assert results.labels(rows[:1]) == ["0"]
