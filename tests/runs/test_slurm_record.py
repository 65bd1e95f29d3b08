"""runs/slurm_record.py: a new run in a SLURM job records the job's id in
``.hydra/slurm.json``, nothing outside SLURM; the id is read back as a run's file (a missing,
damaged or linked record names no job)."""

from __future__ import annotations

import json

import pytest

from trainer_run.runs import slurm_record


@pytest.fixture
def run(tmp_path):
    (tmp_path / "run" / ".hydra").mkdir(parents=True)
    return tmp_path / "run"


def test_a_run_in_a_slurm_job_records_its_id_and_reads_it_back(run, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert slurm_record.job_id() == "4242"
    slurm_record.record(run / ".hydra", run)
    assert (run / ".hydra" / "slurm.json").read_bytes() == b'{"job_id": "4242"}\n'
    assert slurm_record.recorded_job(run) == "4242"


def test_outside_slurm_nothing_is_recorded(run, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert slurm_record.job_id() is None
    slurm_record.record(run / ".hydra", run)
    assert sorted(p.name for p in run.rglob("*")) == [".hydra"]
    assert slurm_record.recorded_job(run) is None


@pytest.mark.parametrize("content", [b"", b"not json", b'["4242"]', b'{"id": "4242"}', b"\xff"],
                         ids=["empty", "text", "a-list", "no-job-id", "not-utf8"])
def test_a_damaged_record_names_no_job(run, content):
    (run / ".hydra" / "slurm.json").write_bytes(content)
    assert slurm_record.recorded_job(run) is None


def test_a_record_that_is_a_link_is_not_followed(run, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"job_id": "4242"}))
    (run / ".hydra" / "slurm.json").symlink_to(elsewhere)
    assert slurm_record.recorded_job(run) is None
    assert slurm_record.recorded_job(tmp_path / "missing") is None


def test_a_numeric_id_is_read_as_text(run):
    (run / ".hydra" / "slurm.json").write_text('{"job_id": 77}')
    assert slurm_record.recorded_job(run) == "77"
