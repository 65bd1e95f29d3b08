"""logger=mlflow in a sweep from the command line (training/loggers/mlflow.py), read back with
MLflow's own client from a local store (a ``file:`` URI in the test's folder, no network): the
params are the config's values (internal keys left out, a ``${oc.env:...}`` as written, never
its value), each metric's history is metrics.jsonl's rows (values and steps), the artifacts are
the run folder's files (its weights and confusion matrices included), a sweep gives one MLflow
run per job, and a resumed run continues its MLflow run with every row once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy
import pytest
from helpers import read_jsonl, run_cli
from omegaconf import OmegaConf

from tests.training.loggers.test_mlflow import store_env  # noqa: F401 - a fixture

ONE_WORKER = True  # the module's runs are trained once (tests/conftest.py)

SMALL = ("trainer.log_interval=5", "trainer.eval_interval=10", "trainer.checkpoint_interval=20",
         "trainer.keep_checkpoints=null", "trainer.progress=false")


NOT_METRICS = ("iteration", "time")


SECRET = "s3cret-folder"
"""The value of the environment variable the sweep's ``dataset.path`` names: no logger holds it."""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, store_env):  # noqa: F811
    """A sweep of two seeds to 30 iterations, with a test split, logged to a file store; then
    its job 0 resumed from its checkpoint at 20 (rows 25 and 30 were logged after it) up to 40,
    in this process (trainer_run.resume)."""
    import trainer_run

    root = tmp_path_factory.mktemp("mlflow").resolve()
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(500, 4)).astype(numpy.float32)
    y = (x[:, 0] + 0.3 * rng.normal(size=500) > 0).astype(numpy.int64)
    (root / SECRET).mkdir()
    numpy.savez(root / SECRET / "train.npz", x=x[:400], y=y[:400])
    numpy.savez(root / "test.npz", x=x[400:], y=y[400:])
    uri = (root / "store").as_uri()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TEST_DATA", str(root / SECRET))
        result = run_cli("-m", "seed=0,1", "logger=[jsonl,mlflow]",
                         f"logger.mlflow.tracking_uri={uri}", "logger.mlflow.tags={team: vision}",
                         "dataset=npz", "dataset.path=${oc.env:MLFLOW_TEST_DATA}/train.npz",
                         f"dataset.test_path={root}/test.npz", "metrics=[confusion_matrix]", *SMALL,
                         "trainer.max_iterations=30", f"hydra.sweep.dir={root}/sweep")
        assert result.returncode == 0, result.stderr
        job = root / "sweep" / "0"
        first = read_jsonl(job / "metrics.jsonl")
        first_run = _run_id(job)
        trainer_run.resume(job / "checkpoints" / "iter_00000020", ["trainer.max_iterations=40"])
    from mlflow.tracking import MlflowClient

    return {"root": root, "uri": uri, "first": first, "first_run": first_run,
            "client": MlflowClient(tracking_uri=uri)}


def _run_id(job: Path) -> str:
    return json.loads((job / "mlflow.json").read_text())["run_id"]


def _flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _text(value) -> str:
    """How the config's value reads in MLflow: YAML's true/false/null, else Python's text."""
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _logged(rows: list[dict], key: str) -> list[tuple[int, float]]:
    return sorted((r["iteration"], math.nan if r[key] is None else r[key]) for r in rows if key in r)


def test_a_sweep_gives_one_mlflow_run_per_job_in_one_experiment(sweep):
    client, jobs = sweep["client"], [sweep["root"] / "sweep" / str(i) for i in (0, 1)]
    runs = [client.get_run(_run_id(job)) for job in jobs]
    assert len({r.info.run_id for r in runs}) == 2
    assert len({r.info.experiment_id for r in runs}) == 1
    assert client.get_experiment(runs[0].info.experiment_id).name == "trainer-run"
    assert [r.info.run_name for r in runs] == ["sweep/0", "sweep/1"]
    assert [r.data.tags["trainer-run.run_dir"] for r in runs] == [str(job) for job in jobs]
    assert {r.data.tags["team"] for r in runs} == {"vision"}
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert [r.data.params["seed"] for r in runs] == ["0", "1"]


def test_params_are_the_config_s_values_but_internals_and_a_resolver_s_value(sweep, monkeypatch):
    job = sweep["root"] / "sweep" / "1"
    written = OmegaConf.load(job / ".hydra" / "config.yaml")
    monkeypatch.setenv("MLFLOW_TEST_DATA", str(sweep["root"] / SECRET))
    config = OmegaConf.to_container(written, resolve=True)
    expected = {k: _text(v) for k, v in _flat(config).items()
                if k.split(".")[0] not in ("hydra", "resume") and not k.startswith("updater.callbacks.")}
    expected["dataset.path"] = "${oc.env:MLFLOW_TEST_DATA}/train.npz"  # as the command line gave it
    params = sweep["client"].get_run(_run_id(job)).data.params
    assert params == expected
    assert params["logger.mlflow.tracking_uri"] == sweep["uri"]
    assert config["dataset"]["path"] == f"{sweep['root']}/{SECRET}/train.npz"  # what it trained on
    assert not [v for v in params.values() if SECRET in v]


def test_each_metric_s_history_is_metrics_jsonl_s_rows_and_the_test_metrics_are_the_summary_s(sweep):
    job, client = sweep["root"] / "sweep" / "1", sweep["client"]
    rows, run_id = read_jsonl(job / "metrics.jsonl"), _run_id(job)
    keys = {k for row in rows for k in row if k not in NOT_METRICS}
    assert {"train/loss", "val/loss", "val/accuracy", "lr", "epoch", "elapsed_s"} <= keys
    for key in keys:
        assert _history(client, run_id, key) == _logged(rows, key), key
    summary = json.loads((job / "summary.json").read_text())
    step = summary["test_weights"]["iteration"]
    for key in ("test/loss", "test/accuracy"):
        assert _history(client, run_id, key) == [(step, summary[key])]
    objective = summary["objective"]
    assert _history(client, run_id, "best/val/loss") == [(objective["best_iteration"], objective["best"])]


def test_the_artifacts_are_the_run_folder_s_files_its_weights_and_confusion_matrices(sweep, tmp_path):
    job = sweep["root"] / "sweep" / "1"
    folder = Path(sweep["client"].download_artifacts(_run_id(job), "", str(tmp_path)))
    sent = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert sent == ["config.yaml", "confusion/test.json", "confusion/test.png", "confusion/val.json",
                    "confusion/val.png", "model.npz", "model_best.npz", "summary.json"]  # no plot
    for name in sent:
        path = job / ".hydra" / name if name == "config.yaml" else job / name
        assert (folder / name).read_bytes() == path.read_bytes(), name


def test_a_resumed_run_continues_its_mlflow_run_with_every_row_once(sweep, tmp_path):
    job, client = sweep["root"] / "sweep" / "0", sweep["client"]
    run_id = _run_id(job)
    assert run_id == sweep["first_run"]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    rows, first = read_jsonl(job / "metrics.jsonl"), sweep["first"]
    assert [r["iteration"] for r in rows] == [5, 10, 15, 20, 25, 30, 35, 40]
    for key in {k for row in rows for k in row if k not in NOT_METRICS} - {"elapsed_s"}:
        assert _history(client, run_id, key) == _logged(rows, key), key
    # rows 25 and 30, recomputed alike, were not sent again: their elapsed_s is the first session's
    assert _history(client, run_id, "elapsed_s") == _logged(first + rows[6:], "elapsed_s")
    assert run.data.params["trainer.max_iterations"] == "30"  # a param never changes
    assert run.data.tags["resumed.trainer.max_iterations"] == "40"
    summary = Path(client.download_artifacts(run_id, "summary.json", str(tmp_path)))
    assert summary.read_bytes() == (job / "summary.json").read_bytes()
    assert json.loads(summary.read_text())["iteration"] == 40
