"""runner/lifecycle.py: a run's lifecycle from a Job (no Hydra global): a new run trains, records
and signs; a new run that fails before training leaves nothing, up to the folder that existed;
a folder in use is refused; a sweep's job whose folder holds its finished run hands back its
value through Finished, with the lock released."""

from __future__ import annotations

import json

import pytest

from trainer_run.compose import composer
from trainer_run.errors import JobFailed
from trainer_run.runner import lifecycle
from trainer_run.runner.lifecycle import Finished, Job
from trainer_run.runs import directory, trust

SMALL = ["trainer.max_iterations=6", "trainer.eval_interval=3", "dataset.size=200",
         "trainer.progress=false"]


def _job(out, overrides, **options) -> tuple[Job, object]:
    cfg = composer.compose(overrides, [], out)
    return Job.composed(cfg.hydra, **options), composer.task(cfg)


def test_a_new_run_trains_records_and_signs(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "alice"))
    out = tmp_path / "run"
    job, cfg = _job(out, SMALL)
    role = lifecycle.run(job, cfg)
    assert role.status == "completed" and role.updater.iteration == 6
    assert directory.is_run(out)
    signature = (out / ".hydra" / "config.sig").read_text().strip()
    assert trust.signed_by_me((out / ".hydra" / "config.yaml").read_bytes(), signature)
    assert json.loads((out / "summary.json").read_text())["iteration"] == 6


def test_a_new_run_that_fails_before_training_leaves_nothing(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    out = kept / "a" / "b" / "run"
    job, cfg = _job(out, [*SMALL, "optimizer.learning_rate=-1"], kept=kept.resolve())
    out.mkdir(parents=True)  # as Hydra makes it before the job
    with pytest.raises(JobFailed) as raised:
        lifecycle.run(job, cfg)
    assert raised.value.exit_code == 2 and "learning_rate" in str(raised.value)
    assert list(kept.iterdir()) == []  # the run's folder and the two made for it are gone


def test_a_folder_in_use_is_refused_and_kept(tmp_path):
    out = tmp_path / "run"
    job, cfg = _job(out, SMALL)
    with directory.RunLock(out):
        with pytest.raises(JobFailed, match=r"run directory .*run is in use by process \d+"):
            lifecycle.run(job, cfg)
    assert out.is_dir()


def test_a_sweeps_job_whose_run_finished_returns_its_value_and_frees_the_folder(tmp_path):
    out = tmp_path / "run"
    first, cfg = _job(out, SMALL)
    lifecycle.run(first, cfg)

    def existing(cfg, folder):
        assert folder == out
        raise Finished(0.25)

    again, cfg = _job(out, SMALL, sweeping=True, existing=existing)
    with pytest.raises(Finished) as done:
        lifecycle.run(again, cfg)
    assert done.value.value == 0.25
    directory.RunLock(out).acquire().release()  # the job's lock was released
