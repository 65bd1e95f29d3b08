"""logger=mlflow (training/loggers/mlflow.py) in this process, read back with MLflow's own
client from a local store (a ``file:`` URI in the test's folder, no network): a recomputed row
is kept beside the first, long values are cut, a linked file is not sent, a tracking URI
MLflow cannot use is one line, no telemetry is sent (a sweep from the command line:
tests/command/test_mlflow_sweep.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from trainer_run.errors import ConfigError


@pytest.fixture(scope="module")
def store_env():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses a file store without
        patch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        yield


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _logger(tmp_path, **options):
    from trainer_run.training.loggers import RunInfo
    from trainer_run.training.loggers.mlflow import MLflow

    return MLflow(tracking_uri=(tmp_path / "store").as_uri(), run=RunInfo(options.pop("config", {})),
                  **options)


def _rows(*losses):
    return [{"iteration": 10 * (i + 1), "epoch": 0.5 * (i + 1), "time": f"2026-01-01T00:00:0{i}.000+00:00",
             "elapsed_s": float(i), "train/loss": loss} for i, loss in enumerate(losses)]


def test_a_recomputed_row_that_differs_is_kept_beside_the_first_and_a_lacking_one_is_sent(
        tmp_path, store_env):
    rows = _rows(0.5, 0.4, 0.3)
    logger = _logger(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    logger.start(out, rows[:1])
    logger.write(rows[1])
    logger.finish("interrupted")
    assert logger.client.get_run(logger.run_id).info.status == "KILLED"
    again = _logger(tmp_path)
    again.start(out, rows[:1])  # resumed from the checkpoint at 10: row 20 is done again
    assert again.run_id == logger.run_id
    assert again.client.get_run(again.run_id).info.status == "RUNNING"
    again.write({**rows[1], "train/loss": 0.45})  # differs: an override changed the training
    again.write(rows[2])
    (out / "summary.json").write_text('{"status": "diverged"}\n')
    (out / "plot.png").write_bytes(b"\x89PNG drawn")
    again.finish("diverged")
    client = again.client
    folder = Path(client.download_artifacts(again.run_id, "", str(tmp_path / "artifacts")))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {
        "summary.json": b'{"status": "diverged"}\n', "plot.png": b"\x89PNG drawn"}
    assert _history(client, again.run_id, "train/loss") == [(10, 0.5), (20, 0.4), (20, 0.45), (30, 0.3)]
    assert _history(client, again.run_id, "epoch") == [(10, 0.5), (20, 1.0), (20, 1.0), (30, 1.5)]
    stamps = {m.step: m.timestamp for m in client.get_metric_history(again.run_id, "train/loss")}
    assert stamps[10] == 1767225600000  # the row's time, in milliseconds
    assert client.get_run(again.run_id).info.status == "FAILED"

    (out / "mlflow.json").unlink()  # as a run logged without MLflow so far
    lacking = _logger(tmp_path, experiment_name="other")
    lacking.start(out, rows)  # a new MLflow run gets the whole history
    assert lacking.run_id != logger.run_id
    assert _history(client, lacking.run_id, "train/loss") == [(10, 0.5), (20, 0.4), (30, 0.3)]


def test_long_values_are_cut_to_mlflow_s_limit_and_refused_characters_replaced(tmp_path, store_env):
    logger = _logger(tmp_path, config={"a": "x" * 7000, "b@c": True, "d": None, "e": [1, 2]})
    out = tmp_path / "run"
    out.mkdir()
    logger.start(out, [{"iteration": 1, "top@5": 0.25}])
    run = logger.client.get_run(logger.run_id)
    assert run.data.params == {"a": "x" * 5997 + "...", "b_c": "true", "d": "null", "e": "[1, 2]"}
    assert run.data.metrics == {"top_5": 0.25}


def test_a_file_behind_a_link_is_not_sent_and_the_status_is_still_set(tmp_path, store_env):
    logger = _logger(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    logger.start(out, [])
    (tmp_path / "secret").write_text("not the run's")
    (out / "plot.png").symlink_to(tmp_path / "secret")
    with pytest.raises(ConfigError, match=r"^logger.mlflow: plot.png is not sent: "):
        logger.finish("completed")
    assert logger.client.get_run(logger.run_id).info.status == "FINISHED"
    assert logger.client.list_artifacts(logger.run_id) == []


@pytest.mark.parametrize("uri, says", [
    ("http://127.0.0.1:9", "logger.mlflow: cannot reach MLflow at http://127.0.0.1:9 "
                           "(logger.mlflow.tracking_uri): API request to http://127.0.0.1:9/"),
    ("nosuch://host", "logger.mlflow.tracking_uri=nosuch://host is not a tracking URI MLflow can use"),
])
def test_a_tracking_uri_mlflow_cannot_use_is_one_line_before_anything_is_written(
        tmp_path, monkeypatch, store_env, uri, says):
    from hydra import compose, initialize_config_dir

    from trainer_run.compose.options import CONFIGS
    from trainer_run.runner.build import build_trainer

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)  # the first call tries once
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("config", overrides=["logger=[mlflow]", f"logger.mlflow.tracking_uri={uri}",
                                           "dataset.size=200"])
    with pytest.raises(ConfigError) as caught:
        build_trainer(OmegaConf.to_container(cfg, resolve=True), tmp_path / "run")
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()


def test_without_mlflow_the_logger_is_refused_naming_the_extra(monkeypatch):
    from trainer_run.training import loggers

    for module in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")] or ["mlflow"]:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    monkeypatch.delitem(sys.modules, "trainer_run.training.loggers.mlflow", raising=False)
    monkeypatch.delattr(loggers, "mlflow", raising=False)
    target = {"_target_": "trainer_run.training.loggers.mlflow.MLflow"}
    with pytest.raises(ConfigError) as caught:
        loggers.build({"mlflow": target}, loggers.RunInfo())
    assert str(caught.value) == 'logger=mlflow needs mlflow-skinny: pip install "trainer-run[mlflow]"'


def test_mlflow_sends_no_telemetry():
    """Outside a test or CI (where MLflow turns it off itself), importing MLflow starts its
    telemetry client; through the logger it does not."""
    quiet = {k: v for k, v in os.environ.items()
             if k not in ("PYTEST_CURRENT_TEST", "CI", "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    code = ("import trainer_run.training.loggers.mlflow\n"
            "from mlflow.telemetry import get_telemetry_client\n"
            "print(get_telemetry_client())")
    done = subprocess.run([sys.executable, "-c", code], env=quiet, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr


def test_a_run_recorded_at_another_tracking_uri_goes_to_a_new_mlflow_run_there(tmp_path, store_env, capfd):
    from trainer_run.training.loggers import RunInfo
    from trainer_run.training.loggers.mlflow import MLflow

    out = tmp_path / "run"
    out.mkdir()
    rows = _rows(0.5, 0.4)
    first = _logger(tmp_path)
    first.start(out, rows[:1])
    moved = MLflow(tracking_uri=str(tmp_path / "elsewhere"), run=RunInfo())  # a path: a file: URI
    moved.start(out, rows)
    assert moved.uri == (tmp_path / "elsewhere").as_uri()
    assert _history(moved.client, moved.run_id, "train/loss") == [(10, 0.5), (20, 0.4)]
    assert json.loads((out / "mlflow.json").read_text())["run_id"] == moved.run_id
    err = " ".join(capfd.readouterr().err.split())
    assert err == (f"warning: logger.mlflow: this run was logged to MLflow run {first.run_id} at "
                   f"{first.uri}; it now logs to {moved.uri}, in a new MLflow run that gets its "
                   "whole history")
