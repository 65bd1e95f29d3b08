"""trainer-report's table within the console's width (results/fit.py, results/report.py): the
columns that hold one value for every run are said once above the table, headers wrap, the
override columns merge and metric columns move whole into a continuation table rather than
be cut; the title says ``sweep results`` only for a sweep (the command at COLUMNS=100:
tests/command/test_trainer_report.py)."""

from __future__ import annotations

from pathlib import Path

from trainer_run import results
from trainer_run.results import report
from trainer_run.results.fit import Column, constant, fit, header, natural


def _columns() -> list[Column]:
    return [Column("#", ["1", "2"], right=True, key=True), Column("job", ["a", "b"], key=True),
            Column("learning_rate", ["0.1", "0.01"], override=True),
            Column("momentum", ["0.9", "0.5"], override=True),
            Column("scheduler", ["cosine", "constant"], override=True),
            Column("best", ["0.5", "0.25"], right=True, kept=True),
            Column("val/loss", ["0.5", "0.25"], right=True, movable=True),
            Column("time", ["1.0s", "2.0s"], right=True)]


def _layout(tables) -> list[list[tuple[str, int]]]:
    return [[(c.name, c.width) for c in table] for table in tables]


def test_constant_columns_are_said_once_and_the_row_s_name_stays():
    columns = [Column("#", ["1", "2"], right=True, key=True), Column("job", ["0", "0"], key=True),
               Column("best", ["0.1", "0.1"], kept=True), Column("status", ["done", "done"]),
               Column("test/loss", ["", ""]), Column("seed", ["1", "2"])]
    shown, same = constant(columns)
    assert [c.name for c in shown] == ["#", "job", "best", "seed"]
    assert same == [("status", "done")]  # an empty column goes without a word
    one = [Column(c.name, c.cells[:1]) for c in columns]
    assert constant(one) == (one, [])  # one row: everything is kept


def test_headers_wrap_after_slashes_and_underscores_and_at_spaces():
    assert header("best val/loss", 8) == "best\nval/loss"
    assert header("val/accuracy", 8) == "val/\naccuracy"
    assert header("learning_rate", 9) == "learning_\nrate"
    assert header("at iter", 4) == "at\niter"
    assert header("best val/loss", 13) == "best val/loss"
    assert [natural(Column("val/accuracy", ["0.95"]), wrapped) for wrapped in (False, True)] == [12, 8]


def test_columns_side_by_side_with_whole_headers_then_wrapped_headers():
    """Whole headers: 1+3+13+8+9+4+8+4 = 50 characters of cells and 8 * 3 + 1 of rules: 75.
    Wrapped (learning_ / rate): 46 + 25 = 71."""
    whole = [("#", 1), ("job", 3), ("learning_rate", 13), ("momentum", 8), ("scheduler", 9),
             ("best", 4), ("val/loss", 8), ("time", 4)]
    assert _layout(fit(_columns(), 75)) == [whole]
    assert _layout(fit(_columns(), 71)) == [[(n, 9 if n == "learning_rate" else w) for n, w in whole]]


def test_narrower_the_overrides_merge_then_metrics_move_into_a_continuation():
    """Merged, the overrides (49 characters at most) may narrow to 24: 1+3+24+4+8+4 + 19 = 63,
    narrower than the 71 of separate columns. At 70 the overrides get the 7 left (31); at 60
    val/loss moves out (52 wide), the overrides get 24 + 8, and val/loss follows with the
    row's number and job."""
    at_70 = fit(_columns(), 70)
    assert _layout(at_70) == [[("#", 1), ("job", 3), ("overrides", 31), ("best", 4),
                               ("val/loss", 8), ("time", 4)]]
    assert at_70[0][2].cells == ["learning_rate=0.1 momentum=0.9 scheduler=cosine",
                                 "learning_rate=0.01 momentum=0.5 scheduler=constant"]
    assert _layout(fit(_columns(), 60)) == [
        [("#", 1), ("job", 3), ("overrides", 32), ("best", 4), ("time", 4)],
        [("#", 1), ("job", 3), ("val/loss", 8)]]


def _rows(sweep: Path | None, n: int) -> list[results.Row]:
    return [results.Row(str(i), Path(str(i)), [f"seed={i}"], metric="val/loss", mode="min",
                        best=0.1 * i, sweep=sweep) for i in range(n)]


def test_the_title_says_sweep_results_only_for_a_sweep():
    assert report.title(_rows(Path("s"), 3)) == "sweep results: ranked by val/loss (min)"
    assert report.title(_rows(None, 2)) == "runs: ranked by val/loss (min)"
    assert report.title(_rows(None, 1)) == "run: objective val/loss (min)"
    mixed = _rows(Path("s"), 2) + _rows(None, 1)
    assert report.kind(mixed) == "runs"
    mixed[0].metric = "val/accuracy"
    assert report.title(mixed) == "runs: ranked by each run's objective"


def test_the_line_above_names_the_shared_overrides_and_the_constant_columns():
    rows = [results.Row(str(i), Path(str(i)), ["optimizer=adam", f"seed={i}"]) for i in range(2)]
    assert report.shared(rows, [("status", "max_iterations"), ("at iter", "1000")]) == (
        "all runs: optimizer=adam; status max_iterations; best at iteration 1000")
    assert report.shared(rows[:1] * 0) is None


