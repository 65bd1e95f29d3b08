"""The results of runs written and shown (results/report.py): results.csv and results.md in ranked
order with their captions, the objectives that differ named, the jobs and the seed table printed."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from tests.results.test_runs import _four, _summary, _sweep
from trainer_run import results


def test_results_csv_holds_the_ranking_and_the_summaries_values(tmp_path):
    sweep = _four(tmp_path)
    results.write(results.collect([sweep]), sweep)
    with open(sweep / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        lines = list(reader)
    assert reader.fieldnames == ["rank", "job", "overrides", "metric", "mode", "best", "best_iteration",
                                 "final", "train/loss", "val/accuracy", "val/loss", "test/accuracy",
                                 "status", "error", "elapsed_s", "iteration"]
    assert [line["rank"] for line in lines] == ["1", "2", "3", "4"]
    assert [line["job"] for line in lines] == ["1", "3", "0", "2"]
    assert [float(line["best"]) for line in lines[:3]] == [0.2, 0.3, 0.5]
    assert float(lines[0]["val/accuracy"]) == 1 - 0.2 and float(lines[0]["train/loss"]) == 0.2 / 2
    assert lines[0]["overrides"] == "trainer.max_iterations=200 optimizer.learning_rate=0.1"
    assert lines[0]["status"] == "max_iterations" and lines[0]["best_iteration"] == "750"
    failed = lines[3]
    assert failed["status"] == "failed" and failed["error"] == "loss went to the moon"
    assert failed["best"] == "" and failed["val/loss"] == "" and failed["iteration"] == "0"
    assert not (sweep / "results_by_seed.csv").exists()


def test_results_md_rows_are_in_ranked_order_with_the_captions(tmp_path):
    sweep = _four(tmp_path)
    results.write(results.collect([sweep]), sweep)
    text = (sweep / "results.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[1] for row in rows] == ["1", "3", "0", "2"]
    assert "| 0.2 |" in rows[0] and "failed: loss went to the moon" in rows[3]
    assert "ranked by val/loss (min)" in text
    assert "all jobs: trainer.max_iterations=200" in text


def test_objectives_that_differ_are_named_in_a_caption(tmp_path):
    summaries = [_summary(0.3), _summary(0.1), _summary(0.2),
                 _summary(0.9, metric="val/accuracy", mode="max")]
    rows = results.rank(results.collect([_sweep(tmp_path, summaries)]))
    assert [row.job for row in rows] == ["3", "1", "2", "0"]
    assert "objectives differ: val/loss (min) in 3 jobs, val/accuracy (max) in 1" in results.captions(rows)


def test_show_prints_the_jobs_in_ranked_order_and_a_failed_jobs_error(tmp_path):
    sweep = _four(tmp_path)
    out = io.StringIO()
    results.show(results.collect([sweep]), Console(file=out, width=200))
    text = out.getvalue()
    assert "sweep results: ranked by val/loss (min)" in text
    assert "failed: loss went to the moon" in text
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if "│" in line]
    jobs = [row[1] for row in cells if row and row[0].isdigit()]  # the table's lines, top down
    assert jobs == ["1", "3", "0", "2"]
    assert "all jobs: trainer.max_iterations=200" in text and "12.3s" in text


def test_show_prints_the_seed_table(tmp_path):
    summaries = [_summary(b, overrides=[f"opt={o}", f"seed={s}"])
                 for o, bs in (("x", [0.5, 0.7]), ("y", [0.1, 0.3])) for s, b in enumerate(bs)]
    out = io.StringIO()
    results.show(results.collect([_sweep(tmp_path, summaries)]), Console(file=out, width=200))
    text = out.getvalue()
    second = text[text.index("across seeds"):]
    assert second.index("opt=y") < second.index("opt=x")
    assert "0.6" in second and "0.1414" in second
