"""The progress readout (training/extensions/progress.py): every evaluation row stays in the final
table."""

from __future__ import annotations

import pytest
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


def _run_rows() -> list[dict]:
    """A run's rows with ``metrics=[f1_macro,recall]`` and ``trainer.ema_decay=0.99``: evaluations
    every 2 iterations, log points every 6, values of awkward lengths."""
    rows = []
    for i in range(2, 13, 2):
        row = {"iteration": i, "epoch": i / 3.2, "time": "t", "elapsed_s": 0.1 * i}
        if i % 6 == 0:
            row |= {"lr": 0.001, "train/accuracy": 0.5 + i / 97, "train/loss": 0.26123456 / i}
        for split in ("val/", "val/ema/"):
            row |= {f"{split}accuracy": 0.4583 + i / 1000, f"{split}f1_macro": 0.3766123 + i / 713,
                    f"{split}loss": 1.234e-05 * i, f"{split}recall/0": 0.7, f"{split}recall/1": 0.8}
        rows.append(row)
    return rows


@pytest.mark.parametrize("width", [40, 80, 110])
def test_the_final_table_cuts_no_number_and_no_header_at_any_width(width):
    """Every value, as the table formats it, is a whole cell of the output; no header or cell is
    cut (no ``…``); no line is wider than the console; each header's last word is whole."""
    rows = _run_rows()
    console = Console(record=True, width=width)
    MetricsTable(_Log(rows), console=console,
                 leave_out=lambda key: "/recall/" in key).finalize(_Trainer())
    text = console.export_text()
    assert "…" not in text
    assert max(map(len, text.splitlines())) <= width
    cells = {cell.strip() for line in text.splitlines() for cell in line.split("│")}
    words = {word for line in text.splitlines() for word in line.replace("┃", " ").split()}
    said = text.split("all rows: ", 1)[1].splitlines()[0] if "all rows: " in text else ""
    for row in rows:
        for key, value in row.items():
            if key in ("time", "elapsed_s") or "/recall/" in key:
                continue
            shown = str(value) if isinstance(value, int) else f"{value:.4g}"
            assert shown in cells or f"{key} {shown}" in said, (key, shown)
            assert key.rpartition("/")[2] in words or f"{key} {shown}" in said, key
    assert "0.7" not in cells and "recall" not in text


def test_a_value_the_same_wherever_it_is_logged_is_said_once_and_a_single_one_stays():
    """lr, logged at the log points alone, is one value: said above the table; the SWA row's
    single value stays in its column."""
    rows = [{"iteration": 2, "val/loss": 0.5}, {"iteration": 3, "lr": 0.001, "train/loss": 0.75},
            {"iteration": 6, "lr": 0.001, "train/loss": 0.625, "val/loss": 0.375},
            {"iteration": 6, "val/swa/loss": 0.25}]
    console = Console(record=True, width=80)
    MetricsTable(_Log(rows), console=console).finalize(_Trainer())
    lines = console.export_text().splitlines()
    assert lines[:2] == ["metrics (completed)", "all rows: lr 0.001"]
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]
    assert cells == [["2", "", "0.5", ""], ["3", "0.75", "", ""], ["6", "0.625", "0.375", ""],
                     ["6", "", "", "0.25"]]
