"""runs/summary.py: summary.json written whole and read back; a damaged one reads as none
(recorded) or names the file (read); a file reading refuses (a link, a device) is refused by
both."""

from __future__ import annotations

import json
import math

import pytest

from trainer_run.errors import ConfigError
from trainer_run.runs import summary


def test_a_summary_written_reads_back_with_nan_as_null(tmp_path):
    written = {"status": "completed", "iteration": 30, "objective": {"best": 0.25, "final": math.nan},
               "train/loss": math.inf}
    summary.write(tmp_path, written)
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "status": "completed", "iteration": 30, "objective": {"best": 0.25, "final": None},
        "train/loss": None}
    assert summary.read(tmp_path) == summary.recorded(tmp_path) == {
        "status": "completed", "iteration": 30, "objective": {"best": 0.25, "final": None},
        "train/loss": None}


def test_no_summary_is_an_empty_one(tmp_path):
    assert summary.read(tmp_path) == {} and summary.recorded(tmp_path) == {}


@pytest.mark.parametrize("text, reason", [
    ('{"status": "compl', "is not valid JSON"),
    ("[1, 2]", "is not a run summary (expected a JSON object)"),
    ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be a run summary"),
    (b"\xff\xfe", "is not valid JSON"),
])
def test_a_damaged_summary_names_the_file_or_reads_as_none(tmp_path, text, reason):
    path = tmp_path / "summary.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as raised:
        summary.read(tmp_path)
    assert str(raised.value).startswith(f"{path} {reason}")
    assert summary.recorded(tmp_path) == {}


def test_a_summary_that_is_a_link_is_refused_by_both(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"status": "completed"}')
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").symlink_to(elsewhere)
    for reader in (summary.read, summary.recorded):
        with pytest.raises(ConfigError, match="link"):
            reader(run)
