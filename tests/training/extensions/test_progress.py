"""The progress readout (training/extensions/progress.py): every evaluation row stays in the final
table."""

from __future__ import annotations

from rich.console import Console

from trainer_run.training.extensions.progress import MetricsTable, kept_rows


def test_every_evaluation_row_stays_in_the_final_table():
    rows = [{"iteration": i, "train/loss": 1.0 / i} | ({"val/loss": 2.0 / i} if i % 7 == 0 else {})
            for i in range(1, 101)]
    kept, note = kept_rows(rows, 20)
    evaluated = [row["iteration"] for row in rows if "val/loss" in row]
    assert set(evaluated) <= {row["iteration"] for row in kept}
    assert kept[-1] is rows[-1] and len(kept) == 20
    assert [row["iteration"] for row in kept] == sorted(row["iteration"] for row in kept)
    training_only = len(kept) - len(evaluated) - 1   # the last row (100) is training-only
    assert note.startswith(f"every evaluation row; {training_only} of {100 - 14 - 1} training-only")
    assert kept_rows(rows[:20], 20) == (rows[:20], "")


def test_rows_that_are_all_evaluations_are_all_shown_without_a_note():
    rows = [{"iteration": i, "val/loss": 1.0 / i} for i in range(1, 31)]
    assert kept_rows(rows, 20) == (rows, "")


class _Log:
    def __init__(self, log):
        self.log = log


class _Trainer:
    status = "completed"


def test_the_final_table_leaves_the_columns_it_is_told_to_metrics_jsonl():
    rows = [{"iteration": 10, "val/loss": 0.5, "val/recall/cat": 0.25, "val/recall/dog": 0.75}]
    console = Console(record=True, width=200)
    table = MetricsTable(_Log(rows), console=console,
                         leave_out=lambda key: key.startswith("val/recall/"))
    table.finalize(_Trainer())
    shown = " ".join(console.export_text().split())  # the caption wraps at the table's width
    assert "0.5" in shown and "per-class values: metrics.jsonl" in shown
    assert "0.25" not in shown and "0.75" not in shown and "cat" not in shown
