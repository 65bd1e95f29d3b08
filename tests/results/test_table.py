"""The results table's cells (results/table.py): durations."""

from __future__ import annotations


def test_duration_format():
    from trainer_run.results.table import duration
    assert [duration(s) for s in (12.34, 245, 3720, None)] == ["12.3s", "4m05s", "1h02m", ""]
