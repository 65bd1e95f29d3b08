"""The curves read from a run's metrics (results/curves.py): a cut last line is skipped and a null is
NaN."""

from __future__ import annotations

from trainer_run.results import curves as comparison_curves


def test_a_cut_last_line_is_skipped_and_a_null_is_nan(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"iteration": 10, "val/loss": 0.5}\n{"iteration": 20, "val/loss": null}\n{"iter')
    rows = comparison_curves.read_log(log)
    assert rows == [{"iteration": 10, "val/loss": 0.5}, {"iteration": 20, "val/loss": None}]
