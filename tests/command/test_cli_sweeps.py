"""Sweeps from the command line: the ranked results, failures as rows, continuing a sweep,
seeds, the Optuna preset and the parallel launchers."""

import csv
import json
import signal
import statistics
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from helpers import run_cli

QUICK = ("trainer.max_iterations=60", "trainer.eval_interval=20", "trainer.progress=false")


def _summary(job):
    return json.loads((job / "summary.json").read_text())


def _results(sweep):
    with open(sweep / "results.csv") as f:
        return list(csv.DictReader(f))


def test_results_are_ranked_by_each_jobs_best_objective(tmp_path):
    result = run_cli("-m", "optimizer=adam,sgd", "optimizer.learning_rate=0.1,0.001",
                     f"hydra.sweep.dir={tmp_path}", *QUICK)
    assert result.returncode == 0, result.stderr
    summaries = {str(j): _summary(tmp_path / str(j)) for j in range(4)}
    expected = sorted(summaries, key=lambda j: (summaries[j]["objective"]["best"], int(j)))
    rows = _results(tmp_path)
    assert [row["job"] for row in rows] == expected
    for row in rows:
        summary = summaries[row["job"]]
        assert float(row["best"]) == summary["objective"]["best"]
        assert int(row["best_iteration"]) == summary["objective"]["best_iteration"]
        assert row["overrides"] == " ".join(summary["overrides"])
    assert summaries["0"]["overrides"][:2] == ["optimizer=adam", "optimizer.learning_rate=0.1"]
    assert "sweep results: ranked by val/loss (min)" in result.stdout
    assert (tmp_path / "results.md").read_text().count("\n| ") == 5  # header and 4 jobs


def test_a_failing_combination_is_a_row_and_the_others_complete(tmp_path):
    result = run_cli("-m", "optimizer.learning_rate=0.1,-1,0.01", f"hydra.sweep.dir={tmp_path}",
                     *QUICK)
    assert result.returncode == 1
    assert "error: job 1 (optimizer.learning_rate=-1" in result.stderr
    rows = {row["job"]: row for row in _results(tmp_path)}
    assert rows["1"]["status"] == "failed" and "learning_rate must be >= 0" in rows["1"]["error"]
    assert rows["1"]["rank"] == "3" and rows["1"]["best"] == ""
    assert rows["0"]["status"] == rows["2"]["status"] == "max_iterations"
    assert _summary(tmp_path / "1")["error"] == rows["1"]["error"]


def test_an_error_in_the_users_code_fails_its_job_only(tmp_path):
    (tmp_path / "flaky.py").write_text(
        "def callback(iteration):\n"
        "    raise RuntimeError('boom at %d' % iteration)\n")
    sweep = tmp_path / "sweep"
    result = run_cli("-m", "updater.callbacks.update_on_finish=null,flaky.callback",
                     f"hydra.sweep.dir={sweep}", *QUICK, cwd=tmp_path)
    assert result.returncode == 1
    rows = {row["job"]: row for row in _results(sweep)}
    assert rows["0"]["status"] == "max_iterations"
    assert rows["1"]["status"] == "failed" and rows["1"]["error"].startswith(
        "updater.callbacks.update_on_finish (flaky.callback) raised RuntimeError: boom at 0. No "
        "checkpoint was written before it; once it is fixed, the same sweep run again continues it")
    assert "Traceback" in result.stderr  # the user's bug keeps its traceback


def _interrupt_when(proc, path, timeout=60):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=timeout)


def test_an_interrupted_sweep_rerun_skips_finished_jobs_and_resumes_bit_identically(tmp_path):
    args = ["-m", "optimizer.learning_rate=0.1,0.01", "trainer.max_iterations=1500",
            "trainer.eval_interval=500", "trainer.checkpoint_interval=100", "trainer.progress=false"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert run_cli(*args, f"hydra.sweep.dir={whole}").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "trainer_run.cli", *args, f"hydra.sweep.dir={cut}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _interrupt_when(proc, cut / "1" / "checkpoints" / "latest") == 130
    stderr = proc.stderr.read()
    assert f"continue it with: trainer-run {' '.join(args)} hydra.sweep.dir={cut}" in stderr
    assert _summary(cut / "1")["status"] == "interrupted"
    finished = (cut / "0" / "summary.json").stat().st_mtime_ns
    result = run_cli(*args, f"hydra.sweep.dir={cut}")
    assert result.returncode == 0, result.stderr
    assert "job 0: already completed" in result.stdout and "job 1: resuming" in result.stdout
    assert (cut / "0" / "summary.json").stat().st_mtime_ns == finished
    for job in ("0", "1"):
        a, b = np.load(whole / job / "model.npz"), np.load(cut / job / "model.npz")
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])
        assert _summary(cut / job)["objective"] == _summary(whole / job)["objective"]


def test_a_job_folder_of_other_overrides_is_left_alone(tmp_path):
    """Past the sweep's record (multirun.yaml, compared up front: test_run_directory; a folder
    without it is no sweep to continue), each job folder still refuses a job of other
    overrides: here job 0's folder holds another sweep's job."""
    import shutil

    other = tmp_path / "other"
    assert run_cli("-m", "optimizer.learning_rate=0.5", f"hydra.sweep.dir={other}", *QUICK).returncode == 0
    sweep = tmp_path / "sweep"
    assert run_cli("-m", "optimizer.learning_rate=0.1", f"hydra.sweep.dir={sweep}", *QUICK).returncode == 0
    shutil.rmtree(sweep / "0")
    shutil.copytree(other / "0", sweep / "0")
    before = (sweep / "0" / "summary.json").read_text()
    result = run_cli("-m", "optimizer.learning_rate=0.1", f"hydra.sweep.dir={sweep}", *QUICK)
    assert result.returncode == 1  # the job is the old row; its refusal is an error line
    assert "holds a run of other overrides" in result.stderr
    assert (sweep / "0" / "summary.json").read_text() == before


def test_seeds_are_grouped_with_mean_and_standard_deviation(tmp_path):
    result = run_cli("-m", "seed=0,1,2", "optimizer.learning_rate=0.1,0.01",
                     f"hydra.sweep.dir={tmp_path}", *QUICK)
    assert result.returncode == 0, result.stderr
    bests: dict = {}
    for job in range(6):
        summary = _summary(tmp_path / str(job))
        lr = next(o for o in summary["overrides"] if o.startswith("optimizer.learning_rate"))
        bests.setdefault(lr, []).append(summary["objective"]["best"])
    with open(tmp_path / "results_by_seed.csv") as f:
        groups = list(csv.DictReader(f))
    assert len(groups) == 2
    for group in groups:
        lr = next(o for o in group["overrides"].split() if o.startswith("optimizer.learning_rate"))
        assert group["n"] == "3" and group["seeds"].split() == ["0", "1", "2"]
        assert float(group["mean"]) == pytest.approx(statistics.mean(bests[lr]), rel=1e-12)
        assert float(group["std"]) == pytest.approx(statistics.stdev(bests[lr]), rel=1e-12)
    means = [float(group["mean"]) for group in groups]
    assert means == sorted(means)
    assert "across seeds" in result.stdout


def test_optuna_preset_returns_objectives_and_survives_a_diverging_trial(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    result = run_cli("-m", "hparams_search=optuna", "optimizer=sgd", "hydra.sweeper.n_trials=4",
                     "hydra.sweeper.sampler.n_startup_trials=2", "optimizer.learning_rate=choice(0.1,1e30)",
                     f"hydra.sweep.dir={tmp_path}", *QUICK)
    assert result.returncode == 0, result.stderr
    summaries = [_summary(tmp_path / str(j)) for j in range(4)]
    statuses = {s["status"] for s in summaries}
    assert "diverged" in statuses and "completed" in statuses
    best = min((s for s in summaries if s["objective"]["best"] is not None),
               key=lambda s: s["objective"]["best"])
    found = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert found["best_value"] == best["objective"]["best"]
    for key, value in found["best_params"].items():
        assert f"{key}={value}" in best["overrides"] or f"{key}={value!r}" in best["overrides"]
    assert _results(tmp_path)[0]["best"] == repr(found["best_value"])


def test_hparams_search_without_multirun_says_to_add_it(tmp_path):
    result = run_cli("hparams_search=optuna", f"hydra.run.dir={tmp_path / 'r'}")
    assert result.returncode == 2 and "add -m" in result.stderr


def test_joblib_launcher_runs_two_jobs_at_once(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    result = run_cli("-m", "optimizer.learning_rate=0.1,0.01", "hydra/launcher=joblib",
                     "hydra.launcher.n_jobs=2", "trainer.max_iterations=4000", "trainer.progress=false",
                     f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    jobs = [tmp_path / "0", tmp_path / "1"]
    pids = {(job / ".lock").read_text().strip() for job in jobs}
    assert len(pids) == 2  # two worker processes
    starts = [(job / ".hydra" / "config.yaml").stat().st_mtime_ns for job in jobs]
    ends = [(job / "summary.json").stat().st_mtime_ns for job in jobs]
    assert max(starts) < min(ends)  # each started before the other ended (a job of 800
    # iterations trained in 0.4 s, less than the 0.44 s between the two starts seen under load)
    assert [row["job"] for row in _results(tmp_path)] == sorted(
        ["0", "1"], key=lambda j: _summary(tmp_path / j)["objective"]["best"])


def test_submitit_local_launcher_runs_the_jobs_and_ranks_them(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    result = run_cli("-m", "optimizer.learning_rate=0.1,0.01", "hydra/launcher=submitit_local",
                     f"hydra.sweep.dir={tmp_path}", *QUICK)
    assert result.returncode == 0, result.stderr
    bests = {j: _summary(tmp_path / j)["objective"]["best"] for j in ("0", "1")}
    assert [row["job"] for row in _results(tmp_path)] == sorted(bests, key=bests.get)


def _finished(folder, best, status="completed", overrides=()):
    folder.mkdir(parents=True)
    summary = {"status": status, "stop_reason": status, "iteration": 60, "elapsed_s": 1.0,
               "overrides": list(overrides),
               "objective": {"metric": "val/loss", "mode": "min", "best": best,
                             "best_iteration": 60, "final": best}}
    (folder / "summary.json").write_text(json.dumps(summary))


@pytest.mark.parametrize("case", ["completed", "diverged", "interrupted", "failed here"])
def test_the_sweep_exits_1_when_a_job_failed_or_did_not_finish(tmp_path, monkeypatch, case):
    from trainer_run.cli import sweep_job, sweeps

    _finished(tmp_path / "0", 0.5, overrides=["seed=0"])
    status = "completed" if case == "failed here" else case
    _finished(tmp_path / "1", 0.1, status=status, overrides=["seed=1"])
    monkeypatch.setattr(sweep_job, "FAILED", [2] if case == "failed here" else [])
    expected = 0 if case in ("completed", "diverged") else 1
    assert sweeps.report(tmp_path, ["-m", "seed=0,1"]) == expected
    ranked = _results(tmp_path)
    if case == "interrupted":  # below the finished runs, out of the seed statistics
        assert [row["job"] for row in ranked] == ["0", "1"]
        by_seed = list(csv.DictReader(open(tmp_path / "results_by_seed.csv")))
        assert by_seed[0]["n"] == "1" and float(by_seed[0]["mean"]) == 0.5
