"""The ``logger`` group from the command line: metrics.jsonl, metrics.csv (read back with the
csv module), TensorBoard's event files (read back with TensorBoard's own EventAccumulator) and
plot.png (decoded by matplotlib) hold the same rows, each exactly once after a resume, equal
to those of a run that never stopped; an unknown logger, a bad key or a missing extra is one
line before training; ``logger=[]`` writes no metrics file."""

from __future__ import annotations

import csv
import json
import os
from datetime import datetime

import numpy
import pytest
from helpers import read_jsonl, run_cli

ONE_WORKER = True  # the module's runs are trained once (tests/conftest.py)

ALL = "logger=[jsonl,csv,tensorboard,plot]"


SMALL = ("trainer.log_interval=5", "trainer.eval_interval=10", "trainer.checkpoint_interval=20",
         "trainer.keep_checkpoints=null", "dataset.size=400", "trainer.progress=false")


CLOCK = ("time", "elapsed_s")


def _train(out, *args):
    result = run_cli(f"hydra.run.dir={out}", ALL, *SMALL, *args)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run of 30 iterations resumed from its checkpoint at 20 up to 40, and one of 40."""
    root = tmp_path_factory.mktemp("loggers")
    resumed = _train(root / "resumed", "trainer.max_iterations=30")
    first = read_jsonl(resumed / "metrics.jsonl")
    result = run_cli(f"resume={resumed}/checkpoints/iter_00000020", "trainer.max_iterations=40",
                     "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    return {"resumed": resumed, "whole": _train(root / "whole", "trainer.max_iterations=40"),
            "first": first}


def _without_clock(rows):
    return [{k: v for k, v in row.items() if k not in CLOCK} for row in rows]


def test_a_resumed_run_logs_every_row_once_as_a_run_that_never_stopped(runs):
    resumed = read_jsonl(runs["resumed"] / "metrics.jsonl")
    assert [r["iteration"] for r in runs["first"]] == [5, 10, 15, 20, 25, 30]
    assert [r["iteration"] for r in resumed] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert _without_clock(resumed) == _without_clock(read_jsonl(runs["whole"] / "metrics.jsonl"))
    assert resumed[:4] == runs["first"][:4]  # the checkpoint's rows, time and elapsed_s included


def _csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("run", ["resumed", "whole"])
def test_metrics_csv_holds_the_values_of_metrics_jsonl(runs, run):
    rows = read_jsonl(runs[run] / "metrics.jsonl")
    table = _csv_rows(runs[run] / "metrics.csv")
    keys = list(dict.fromkeys(k for row in rows for k in row))
    assert list(table[0]) == keys  # the header widened when val/ metrics came at iteration 10
    assert len(table) == len(rows)
    for row, line in zip(rows, table):
        for key in keys:
            value = row.get(key)
            if value is None:
                assert line[key] == ""
            elif isinstance(value, str):
                assert line[key] == value
            else:
                assert float(line[key]) == value, key  # the same float, not a rounded one
    assert "val/loss" not in rows[0] and rows[1]["val/loss"] is not None


def _scalars(folder):
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(folder), size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    return accumulator, {tag: [(e.step, e.value, e.wall_time) for e in accumulator.Scalars(tag)]
                         for tag in accumulator.Tags()["scalars"]}


@pytest.mark.parametrize("run", ["resumed", "whole"])
def test_tensorboard_events_hold_every_metric_at_every_step_once(runs, run):
    rows = read_jsonl(runs[run] / "metrics.jsonl")
    folder = runs[run] / "tensorboard"
    assert len(list(folder.glob("events.out.tfevents.*"))) == 1  # a resume replaced the old file
    accumulator, scalars = _scalars(folder)
    metrics = [k for k in dict.fromkeys(k for row in rows for k in row) if k not in ("iteration", "time")]
    assert {"lr", "train/loss", "val/loss", "val/accuracy", "epoch", "elapsed_s"} <= set(metrics)
    for key in metrics:
        expected = [(r["iteration"], float(numpy.float32(r[key])),
                     datetime.fromisoformat(r["time"]).timestamp()) for r in rows if key in r]
        assert [(s, v) for s, v, _ in scalars[key]] == [(s, v) for s, v, _ in expected], key
        assert [w for _, _, w in scalars[key]] == pytest.approx([w for _, _, w in expected], abs=1e-3)
    summary = json.loads((runs[run] / "summary.json").read_text())
    assert scalars["best/val/loss"] == [(40, float(numpy.float32(summary["objective"]["best"])),
                                         pytest.approx(scalars["best/val/loss"][0][2]))]
    hparams = accumulator.PluginTagToContent("hparams")
    assert set(hparams) == {"_hparams_/experiment", "_hparams_/session_start_info",
                            "_hparams_/session_end_info"}
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData.FromString(hparams["_hparams_/session_start_info"])
    values = {k: v.ListFields()[0][1] for k, v in data.session_start_info.hparams.items()}
    assert values["optimizer.learning_rate"] == 0.001 and values["trainer.max_iterations"] == 40
    assert values["optimizer._target_"] == "trainer_run.optimizers.Adam"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(hparams["_hparams_/experiment"])
    assert [m.name.tag for m in experiment.experiment.metric_infos] == ["val/loss", "best/val/loss"]


def test_time_and_elapsed_grow_and_elapsed_counts_more_than_the_training_time(runs):
    rows = read_jsonl(runs["resumed"] / "metrics.jsonl")
    times = [datetime.fromisoformat(r["time"]) for r in rows]
    assert all(t.utcoffset() is not None for t in times)
    assert times == sorted(times)
    elapsed = [r["elapsed_s"] for r in rows]
    assert all(b > a for a, b in zip(elapsed, elapsed[1:]))
    for iteration in (20, 40):
        state = json.loads((runs["resumed"] / f"checkpoints/iter_{iteration:08d}/state.json")
                           .read_text())["trainer"]
        logged = state["extensions"]["log_report"]["elapsed_s"]
        assert logged >= state["elapsed_time"] > 0
        assert [r["elapsed_s"] for r in rows if r["iteration"] == iteration][0] <= logged
    summary = json.loads((runs["resumed"] / "summary.json").read_text())
    assert summary["elapsed_s"] >= elapsed[-1]


def test_plot_png_decodes_at_its_size(runs):
    from matplotlib import image

    for run in ("resumed", "whole"):
        path = runs[run] / "plot.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = image.imread(path)
        assert pixels.shape[:2] == (2 * 250 + 60, 800)  # loss, accuracy (the lr is constant): 2.5 x 8
        # inches each at 100 dpi, and the title's 0.6 inches
        assert pixels[..., :3].std() > 0.05  # curves, not a blank canvas


@pytest.mark.parametrize("logger", ["logger=[jsonl,nosuch]", "logger=nosuch", "logger=[csv],[nosuch]"])
def test_an_unknown_logger_is_refused_with_the_available_ones(tmp_path, logger):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", logger)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines == [
        "error: logger=nosuch is not available; choose one of csv, jsonl, mlflow, plot, tensorboard"]
    assert not (tmp_path / "run").exists()


def test_a_bad_key_of_a_listed_logger_is_refused(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "logger=[jsonl,csv]", "logger.csv.delimter=';'")
    assert result.returncode == 2
    assert "logger.csv.delimter is not a config key" in result.stderr, result.stderr


@pytest.mark.parametrize("name, package", [("tensorboard", "tensorboardX"), ("plot", "matplotlib")])
def test_a_logger_whose_extra_is_missing_is_refused_before_training(tmp_path, monkeypatch, name,
                                                                    package):
    hidden = tmp_path / "site"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(f"import sys\nsys.modules[{package!r}] = None\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")]))
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", f"logger=[jsonl,{name}]", *SMALL,
                     "trainer.max_iterations=5")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f'error: logger={name} needs {package}: pip install "trainer-run[{name}]"']
    assert not (tmp_path / "run").exists()


def test_no_logger_writes_no_metrics_file(tmp_path):
    out = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={out}", "logger=[]", *SMALL, "trainer.max_iterations=5")
    assert result.returncode == 0, result.stderr
    assert not {"metrics.jsonl", "metrics.csv", "plot.png", "tensorboard"} & {p.name for p in out.iterdir()}
    assert json.loads((out / "summary.json").read_text())["train/loss"] > 0
