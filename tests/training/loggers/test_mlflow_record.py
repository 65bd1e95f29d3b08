"""mlflow.json binds its MLflow run to the run folder and the user (training/loggers/
mlflow_record.py): a resume continues the recorded MLflow run only when the record is the
user's, signed for this folder and this tracking URI. A copied folder, or a stranger's record
naming an MLflow run of the user's store, logs to a new MLflow run, says so in one ``note:``
line, and leaves the recorded MLflow run's files in the store byte-identical (content and
mtime), its metric history and artifacts as they were. Read back from a local ``file:`` store
with MLflow's own client (the resumes of a copied or a stranger's run:
tests/command/test_mlflow_record.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_run.training.loggers import RunInfo

ROWS = [{"iteration": 10, "time": "2026-01-01T00:00:00.000+00:00", "train/loss": 0.5},
        {"iteration": 20, "time": "2026-01-01T00:00:01.000+00:00", "train/loss": 0.4}]


@pytest.fixture(autouse=True)
def store_env(monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses a file store without
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


def new_run_note(uri: str) -> str:
    return ("note: logger.mlflow: mlflow.json was not recorded by you for this run folder (it was "
            "copied or moved, or is someone else's), so its MLflow run is left untouched; this run "
            f"logs to a new MLflow run at {uri}, which gets its whole history")


def store_files(store: Path, run_id: str) -> dict:
    """Every file of the MLflow run ``run_id`` in the file store: its bytes and mtime."""
    folder = next(store.glob(f"*/{run_id}"))
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def metric_histories(client, run_id: str) -> dict:
    return {key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
            for key in client.get_run(run_id).data.metrics}


def _logger(store: Path, config: dict | None = None):
    from trainer_run.training.loggers.mlflow import MLflow

    return MLflow(tracking_uri=store.as_uri(), run=RunInfo(config or {"seed": 0}))


def _plant(record: dict, how: str, folder: Path, monkeypatch, tmp_path) -> None:
    """Puts into ``folder`` a record naming the MLflow run of ``record`` (the user's record of
    another folder), as ``how`` says a stranger could make it."""
    from trainer_run.training.loggers import mlflow_record

    uri, experiment, run_id = record["tracking_uri"], record["experiment_id"], record["run_id"]
    if how == "signed by another key":
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "stranger"))
        mlflow_record.write(folder, uri, experiment, run_id)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "keys"))
        return
    planted = dict(record)
    if how == "unsigned":
        planted.pop("signature")
    elif how == "a forged signature":
        planted["signature"] = "hmac-sha256:" + "0" * 64
    elif how == "the user's record of this folder, its run id edited":
        mlflow_record.write(folder, uri, experiment, "f" * 32)
        planted = {**json.loads((folder / "mlflow.json").read_text()), "run_id": run_id}
    (folder / "mlflow.json").write_text(json.dumps(planted))


@pytest.mark.parametrize("how", ["signed by another key", "unsigned", "a forged signature",
                                 "the user's own record of another folder",
                                 "the user's record of this folder, its run id edited"])
def test_a_stranger_s_record_naming_the_user_s_mlflow_run_is_never_written_into(
        tmp_path, monkeypatch, capfd, how):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "keys"))
    store, mine, theirs = tmp_path / "store", tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    first = _logger(store)
    first.start(mine, ROWS[:1])
    (mine / "summary.json").write_text('{"status": "completed"}\n')
    first.finish("completed")
    record = json.loads((mine / "mlflow.json").read_text())
    target = first.run_id
    before, history = store_files(store, target), metric_histories(first.client, target)
    _plant(record, how, theirs, monkeypatch, tmp_path)
    capfd.readouterr()

    resumed = _logger(store)
    resumed.start(theirs, ROWS)
    (theirs / "summary.json").write_text('{"status": "completed"}\n')
    resumed.finish("completed")
    assert resumed.run_id != target
    assert " ".join(capfd.readouterr().err.split()) == new_run_note(store.as_uri())
    assert store_files(store, target) == before
    assert metric_histories(first.client, target) == history == {"train/loss": [(10, 0.5)]}
    assert metric_histories(resumed.client, resumed.run_id) == {"train/loss": [(10, 0.5), (20, 0.4)]}
    assert json.loads((theirs / "mlflow.json").read_text())["run_id"] == resumed.run_id


@pytest.mark.parametrize("content", [b"not json", b"\xff\xfe", b'["run_id"]', b'{"run_id": 7}'])
def test_a_record_that_is_no_record_gives_a_new_mlflow_run(tmp_path, monkeypatch, capfd, content):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "keys"))
    out = tmp_path / "run"
    out.mkdir()
    (out / "mlflow.json").write_bytes(content)
    logger = _logger(tmp_path / "store")
    logger.start(out, ROWS)
    assert " ".join(capfd.readouterr().err.split()) == new_run_note((tmp_path / "store").as_uri())
    assert metric_histories(logger.client, logger.run_id) == {"train/loss": [(10, 0.5), (20, 0.4)]}


def test_the_record_is_signed_for_the_folder_and_the_tracking_uri(tmp_path, monkeypatch):
    from trainer_run.training.loggers import mlflow_record

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "keys"))
    out = tmp_path / "run"
    out.mkdir()
    mlflow_record.write(out, "file:///store", "1", "abc")
    record = mlflow_record.read(out)
    assert set(record) == {"tracking_uri", "experiment_id", "run_id", "signature"}
    assert mlflow_record.mine(out, record)
    for field, value in (("tracking_uri", "http://elsewhere:5000"), ("experiment_id", "2"),
                         ("run_id", "abd")):
        assert not mlflow_record.mine(out, {**record, field: value}), field
    moved = tmp_path / "moved"
    out.rename(moved)
    assert not mlflow_record.mine(moved, record)
