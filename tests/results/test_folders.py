"""Run and sweep folders read into rows (results/folders.py): jobs in numeric order, an unfinished run,
a run folder given directly, a folder that is neither refused by name, and a bad best or objective
named in a warning."""

from __future__ import annotations

import json

import pytest

from tests.results.test_runs import _summary, _sweep
from trainer_run import results
from trainer_run.errors import ConfigError


def test_job_folders_sort_numerically(tmp_path):
    sweep = _sweep(tmp_path, [_summary(0.1 * i) for i in range(12)])
    rows = results.collect([sweep])
    assert [row.job for row in rows] == [str(i) for i in range(12)]


def test_an_unfinished_run_is_a_row_with_its_overrides_and_no_values(tmp_path):
    sweep = _sweep(tmp_path, [_summary(0.4, overrides=["a=1"])])
    (sweep / "1" / "checkpoints").mkdir(parents=True)
    (sweep / "1" / ".hydra").mkdir()
    (sweep / "1" / ".hydra" / "overrides.yaml").write_text("- a=2\n- +b=x\n")
    rows = results.rank(results.collect([sweep]))
    assert [row.job for row in rows] == ["0", "1"]
    unfinished = rows[1]
    assert unfinished.status == "unfinished" and unfinished.overrides == ["a=2", "+b=x"]
    assert unfinished.best is None and unfinished.metrics == {} and unfinished.elapsed_s is None


def test_a_run_folder_given_directly_is_labelled_with_its_path(tmp_path):
    sweep = _sweep(tmp_path, [_summary(0.4)])
    rows = results.collect([sweep / "0"])
    assert [row.job for row in rows] == [str(sweep / "0")] and rows[0].best == 0.4


@pytest.mark.parametrize("make", ["missing", "file", "empty", "unrelated", "corrupt"])
def test_collect_names_a_folder_that_is_neither_a_run_nor_a_sweep(tmp_path, make):
    path = tmp_path / "given"
    named = path
    if make == "file":
        path.write_text("x")
    elif make == "empty":
        path.mkdir()
    elif make == "unrelated":
        (path / "notes").mkdir(parents=True)
        (path / "notes" / "a.txt").write_text("hello")
        (path / "b.csv").write_text("1,2")
    elif make == "corrupt":
        (path / "0").mkdir(parents=True)
        named = path / "0" / "summary.json"
        named.write_text('{"iteration": 3,')
    with pytest.raises(ConfigError) as caught:
        results.collect([path])
    message = str(caught.value)
    assert str(named) in message and "\n" not in message
    if make in ("empty", "unrelated"):
        assert "is not a run folder" in message
    if make == "corrupt":
        assert "not valid JSON" in message and "line 1" in message


@pytest.mark.parametrize("best", ["0.2", [0.2], True, {"value": 0.2}])
def test_a_best_of_the_wrong_type_is_named_in_a_warning(tmp_path, best):
    summary = _summary(0.2)
    summary["objective"]["best"] = best
    sweep = _sweep(tmp_path, [summary, _summary(0.4)])
    told = []
    rows = results.collect([sweep], told.append)
    assert rows[0].best is None and rows[1].best == 0.4
    assert told == [f"{sweep / '0' / 'summary.json'} holds objective.best {json.dumps(best)}, not a "
                    "number; the run is shown without it"]


def test_an_objective_that_is_not_an_object_is_named_in_a_warning(tmp_path):
    summary = _summary(0.2)
    summary["objective"] = [0.2]
    sweep = _sweep(tmp_path, [summary])
    told = []
    row, = results.collect([sweep], told.append)
    assert row.best is None and row.metric is None
    assert told == [f"{sweep / '0' / 'summary.json'} holds objective [0.2], not an object; the run "
                    "is shown without its objective"]
