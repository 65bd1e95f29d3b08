"""``metrics=[...]`` in a run (the config key, src/trainer_run/metrics/, wired in
src/trainer_run/runner/extend.py and cli/evaluate.py): the validation and test values are
scikit-learn's on the model's predictions, the objective can follow one, the confusion matrix
is written as data, ``trainer-eval`` computes the same, and metrics change nothing in training:
a run resumed halfway ends as the run without a break, and as the run without metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
from helpers import read_jsonl, run_cli
from sklearn import metrics as sk

import trainer_run
from trainer_run.cli import evaluate

RUN = ["dataset=npz", "trainer.max_iterations=30", "trainer.eval_interval=10", "trainer.log_interval=10",
       "trainer.checkpoint_interval=10", "optimizer=sgd", "optimizer.learning_rate=0.2",
       "trainer.progress=false"]
METRICS = ["metrics=[f1_macro,recall,top_2,confusion_matrix]", "objective.metric=val/f1_macro",
           "objective.mode=max"]
UNDRAWN = ["metrics=[f1_macro,recall,top_2]", *METRICS[1:]]
"""The same metrics, less the confusion matrix's picture (its drawing takes the most time)."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """train.npz and test.npz: three classes of 8 features, by the first one's value."""
    folder = tmp_path_factory.mktemp("metrics").resolve()
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(500, 8)).astype(numpy.float32)
    y = numpy.digitize(x[:, 0] + 0.7 * rng.normal(size=500), [-0.4, 0.4])
    numpy.savez(folder / "train.npz", x=x[:350], y=y[:350])
    numpy.savez(folder / "test.npz", x=x[350:], y=y[350:])
    return folder


@pytest.fixture(scope="module")
def whole(folder) -> Path:
    return trainer_run.train([*_data(folder), *RUN, *METRICS], run_dir=folder / "whole").dir


def _data(folder: Path) -> list[str]:
    return [f"dataset.path={folder / 'train.npz'}", f"dataset.test_path={folder / 'test.npz'}"]


def test_test_metrics_are_scikit_learns_on_the_best_weights_predictions(folder, whole):
    summary = json.loads((whole / "summary.json").read_text())
    rows = [r for r in read_jsonl(whole / "metrics.jsonl") if "val/f1_macro" in r]
    assert len(rows) == 3 and summary["objective"]["metric"] == "val/f1_macro"
    assert summary["objective"]["best"] == max(r["val/f1_macro"] for r in rows)
    assert summary["test_weights"]["checkpoint"] == "best"
    with numpy.load(folder / "test.npz") as test:
        x, y = test["x"], test["y"]
    scores = trainer_run.load_model(whole, "best").predict(x)
    predicted = scores.argmax(1)
    recall = sk.recall_score(y, predicted, average=None, zero_division=0)
    assert {k: v for k, v in summary.items() if k.startswith("test/") and k != "test/loss"} == \
        pytest.approx({"test/accuracy": sk.accuracy_score(y, predicted),
                       "test/f1_macro": sk.f1_score(y, predicted, average="macro"),
                       "test/recall/0": recall[0], "test/recall/1": recall[1],
                       "test/recall/2": recall[2],
                       "test/top_2_accuracy": sk.top_k_accuracy_score(y, scores, k=2)}, rel=1e-6)
    matrix = json.loads((whole / "confusion" / "test.json").read_text())["matrix"]
    assert matrix == sk.confusion_matrix(y, predicted).tolist()
    assert "val/recall/2" in (whole / "metrics.csv").read_text().splitlines()[0]


def test_trainer_eval_computes_the_runs_metrics_and_the_latest_validations_matrix(whole, capsys):
    assert evaluate.run(evaluate.parser().parse_args([str(whole), "split=val",
                                                      "checkpoint=last"])) == 0
    record = json.loads(sorted((whole / "eval").glob("*.json"))[-1].read_text())
    last = read_jsonl(whole / "metrics.jsonl")[-1]
    assert record["metrics"] == pytest.approx({k: v for k, v in last.items()
                                               if k.startswith("val/")}, rel=1e-6)
    saved = json.loads((whole / "confusion" / "val.json").read_text())
    assert record["confusion_matrix"] == saved
    assert len(list((whole / "eval").glob("*_confusion.png"))) == 1
    assert "val/f1_macro" in capsys.readouterr().out


def test_a_resumed_run_and_a_run_without_metrics_end_bit_for_bit_as_the_whole_run(folder, whole):
    half = trainer_run.train([*_data(folder), *RUN, *UNDRAWN, "trainer.max_iterations=20"],
                             run_dir=folder / "half")
    trainer_run.resume(half.dir, ["trainer.max_iterations=30"])
    plain = trainer_run.train([*_data(folder), *RUN], run_dir=folder / "plain")
    model = (whole / "model.npz").read_bytes()
    assert (half.dir / "model.npz").read_bytes() == model == (plain.dir / "model.npz").read_bytes()

    def rows(run):
        return [{k: v for k, v in r.items() if k not in ("time", "elapsed_s")}
                for r in read_jsonl(run / "metrics.jsonl")]
    assert rows(half.dir) == rows(whole)


def test_the_command_line_takes_metrics_and_refuses_a_bad_one_in_one_line(folder):
    done = run_cli(*_data(folder), *RUN, "trainer.max_iterations=10", "metrics=[top_5]",
                   f"hydra.run.dir={folder / 'bad'}", cwd=folder)
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: metrics[0]: top_k with k=5 counts every example as a hit with 3 classes; choose "
        "k below 3"), done.stderr
