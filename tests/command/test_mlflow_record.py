"""mlflow.json binds its MLflow run to the run folder and the user (training/loggers/
mlflow_record.py), as a resume from the command line or from Python meets it: a copied folder,
or a stranger's re-signed record, logs to a new MLflow run, says so in one ``note:`` line, and
leaves the recorded MLflow run's files in the store byte-identical (content and mtime), its
metric history as it was; the original folder continues its own. Read back from a local
``file:`` store with MLflow's own client."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from run_folders import QUICK, environment

from tests.training.loggers.test_mlflow_record import (
    metric_histories,
    new_run_note,
    store_env,  # noqa: F401 - an autouse fixture, so it applies here too
    store_files,
)


def _cli(*arguments, keys: Path):
    return subprocess.run([sys.executable, "-m", "trainer_run.cli", *arguments],
                          env=environment(keys), capture_output=True, text=True, timeout=300)


def test_a_copied_run_s_resume_logs_to_a_new_mlflow_run_and_the_original_s_stays_as_it_was(tmp_path):
    from mlflow.tracking import MlflowClient

    keys, store = tmp_path / "keys", tmp_path / "store"
    logged = ("logger=[jsonl,mlflow]", f"logger.mlflow.tracking_uri={store.as_uri()}")
    done = _cli(*QUICK, *logged, f"hydra.run.dir={tmp_path / 'run'}", keys=keys)
    assert done.returncode == 0, done.stderr
    original = json.loads((tmp_path / "run" / "mlflow.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=store.as_uri())
    before, history = store_files(store, original), metric_histories(client, original)
    assert history["train/loss"][-1][0] == 6

    copy = tmp_path / "run2"
    shutil.copytree(tmp_path / "run", copy)
    done = _cli(f"resume={copy}", "trainer.max_iterations=9", keys=keys)
    assert done.returncode == 0, done.stderr
    assert new_run_note(store.as_uri()) in done.stderr.splitlines()
    new = json.loads((copy / "mlflow.json").read_text())["run_id"]
    assert new != original
    assert store_files(store, original) == before  # not a byte, not an mtime changed
    assert metric_histories(client, original) == history
    assert [s for s, _ in metric_histories(client, new)["train/loss"]] == [3, 6, 9]  # the whole history
    assert client.get_run(new).data.tags["trainer-run.run_dir"] == str(copy.resolve())

    done = _cli(f"resume={tmp_path / 'run'}", "trainer.max_iterations=9", keys=keys)
    assert done.returncode == 0, done.stderr  # the original folder still continues its own
    assert "note: logger.mlflow" not in done.stderr
    assert json.loads((tmp_path / "run" / "mlflow.json").read_text())["run_id"] == original
    assert [s for s, _ in metric_histories(client, original)["train/loss"]] == [3, 6, 9]


def test_a_stranger_s_run_resumed_from_python_at_a_checkpoint_logs_to_a_new_mlflow_run(tmp_path):
    """A variant: the run is the user's, given to a stranger who re-signed its record with
    their key and gave it back; trainer_run.resume from a checkpoint of it."""
    from mlflow.tracking import MlflowClient

    keys, store = tmp_path / "keys", tmp_path / "store"
    done = _cli(*QUICK, "logger=[jsonl,mlflow]", f"logger.mlflow.tracking_uri={store.as_uri()}",
                f"hydra.run.dir={tmp_path / 'run'}", keys=keys)
    assert done.returncode == 0, done.stderr
    original = json.loads((tmp_path / "run" / "mlflow.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=store.as_uri())
    before, history = store_files(store, original), metric_histories(client, original)
    theirs = shutil.copytree(tmp_path / "run", tmp_path / "theirs")
    resign = ("import json, sys; from trainer_run.training.loggers import mlflow_record as r; "
              "d = json.loads(open(sys.argv[1] + '/mlflow.json').read()); "
              "r.write(sys.argv[1], d['tracking_uri'], d['experiment_id'], d['run_id'])")
    subprocess.run([sys.executable, "-c", resign, str(theirs)], check=True,
                   env=environment(tmp_path / "stranger"))
    assert json.loads((theirs / "mlflow.json").read_text())["run_id"] == original
    code = ("import sys, trainer_run; trainer_run.resume(sys.argv[1], ['trainer.max_iterations=9', "
            "'trust=true'])")
    done = subprocess.run([sys.executable, "-c", code, str(theirs / "checkpoints" / "iter_00000003")],
                          env=environment(keys), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert new_run_note(store.as_uri()) in done.stderr.splitlines()
    new = json.loads((theirs / "mlflow.json").read_text())["run_id"]
    assert new != original
    assert store_files(store, original) == before
    assert metric_histories(client, original) == history
    assert [s for s, _ in metric_histories(client, new)["train/loss"]] == [3, 6, 9]
