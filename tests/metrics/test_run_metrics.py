"""The metrics of a split (src/trainer_run/metrics/run_metrics.py): outputs and labels gathered
over uneven batches give scikit-learn's values on the whole split, keyed by the split's prefix
and, per class, by the dataset's class names; the confusion matrix goes to its receiver; a
user's metric gives a number or a dict of them and anything else names it; a model without
forward is refused in one line. Perplexity is the mean over every position of the split, not
a mean of the batches' values, and a sequence's outputs count each position."""

from __future__ import annotations

import json
import math

import numpy
import pytest
from run_folders import QUICK
from sklearn import metrics as sk

import trainer_run
from trainer_run.errors import ConfigError, UserCodeError
from trainer_run.metrics import build, run_metrics

CLASSES = ["cat", "T-shirt/top", "dog"]


class Identity:
    """A model whose outputs are its inputs (the inputs are the scores)."""

    def forward(self, x):
        return x


def _gathered(scores, labels, batch=7):
    gathered = run_metrics.Gathered(Identity())
    for start in range(0, len(labels), batch):
        gathered.add((scores[start:start + batch], labels[start:start + batch]))
    return gathered


def spread(y_pred, y_true):
    """A user's metric returning a dict."""
    return {"max": numpy.max(y_pred), "count": len(y_true)}


def listed(y_pred, y_true):
    return [1.0]


def test_a_split_gathered_over_uneven_batches_gives_scikit_learns_values_keyed_by_class_name():
    rng = numpy.random.default_rng(3)
    scores, labels = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    predicted = scores.argmax(1)
    matrices = []
    measured = build(["f1_macro", "precision", "top_2", "confusion_matrix",
                      {"_target_": f"{__name__}.spread", "name": "s"}], "classification",
                     Identity(), 3, CLASSES, lambda *given: matrices.append(given))
    found = measured.compute(_gathered(scores, labels), "test/")
    precision = sk.precision_score(labels, predicted, average=None, zero_division=0)
    assert found == pytest.approx({
        "test/f1_macro": sk.f1_score(labels, predicted, average="macro"),
        "test/precision/cat": precision[0], "test/precision/T-shirt_top": precision[1],
        "test/precision/dog": precision[2],
        "test/top_2_accuracy": sk.top_k_accuracy_score(labels, scores, k=2),
        "test/s/max": scores.max(), "test/s/count": 40.0}, rel=1e-12)
    [(prefix, matrix, names)] = matrices
    assert prefix == "test/" and names == ["cat", "T-shirt_top", "dog"]
    numpy.testing.assert_array_equal(matrix, sk.confusion_matrix(labels, predicted))


def test_regression_metrics_of_a_split_are_scikit_learns():
    rng = numpy.random.default_rng(4)
    y, t = rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    found = build(["mae", "rmse", "r2"], "regression", Identity(), 2).compute(_gathered(y, t), "val/")
    assert found == pytest.approx({"val/mae": sk.mean_absolute_error(t, y),
                                   "val/rmse": sk.root_mean_squared_error(t, y),
                                   "val/r2": sk.r2_score(t, y)}, rel=1e-12)


def test_a_users_metric_returning_a_list_or_writing_into_the_predictions_is_named():
    scores, labels = numpy.eye(3), numpy.arange(3)
    measured = build([{"_target_": f"{__name__}.listed"}], "classification", Identity(), 3)
    with pytest.raises(UserCodeError, match=r"^metrics\[0\] \(.*listed\) returned list \[1.0\]; a "
                                            r"metric returns a float, or a dict of floats by name$"):
        measured.compute(_gathered(scores, labels), "val/")
    measured.chosen = [measured.chosen[0].__class__("metrics[0]", "w", "users", _writes)]
    with pytest.raises(UserCodeError, match=r"^metrics\[0\] \(.*_writes\) raised ValueError: "
                                            "assignment destination is read-only"):
        measured.compute(_gathered(scores, labels), "val/")


def _writes(y_pred, y_true):
    y_pred[0] = 1.0
    return 0.0


def test_a_model_without_forward_is_refused_in_one_line_and_no_metrics_builds_nothing():
    with pytest.raises(ConfigError, match=r"^metrics=\['r2'\] are computed from the model's "
                                          r"predictions and object has no forward\(x\)"):
        build(["r2"], "regression", object(), 1)
    assert build([], "regression", object(), 1) is None


@pytest.mark.parametrize("classes, count, keys", [
    (None, 3, ["0", "1", "2"]),
    (["a b", "c/d", 7], 3, ["a_b", "c_d", "7"]),
    (["a", "b"], 3, ["0", "1", "2"]),          # names of another number of classes
    (["a/b", "a b", "c"], 3, ["0", "1", "2"]),  # two names that give one key
])
def test_class_keys_are_the_names_made_safe_or_the_ids(classes, count, keys):
    assert run_metrics.class_keys(classes, count) == keys


def test_outputs_the_metrics_cannot_read_name_the_model():
    """A classifier's outputs of one value per example, a regression's of another size than
    its targets."""
    measured = build(["f1_macro"], "classification", Identity(), 3)
    with pytest.raises(UserCodeError, match=r"^model \(.*Identity\).forward\(\) returned outputs "
                                            r"of shape \(6,\); classification metrics read one "
                                            r"score per class"):
        measured.compute(_gathered(numpy.zeros(6), numpy.zeros(6)), "val/")
    measured = build(["mae"], "regression", Identity(), 1)
    with pytest.raises(UserCodeError, match=r"returned outputs of shape \(6, 2\) for targets of "
                                            r"shape \(6,\)"):
        measured.compute(_gathered(numpy.zeros((6, 2)), numpy.zeros(6)), "val/")


def test_per_class_keys_are_told_from_the_others():
    measured = build(["f1_macro", "recall", {"_target_": f"{__name__}.spread", "name": "s"}],
                     "classification", Identity(), 3, CLASSES)
    found = measured.compute(_gathered(*_scores()), "val/ema/")
    assert sorted(k for k in found if measured.per_class(k)) == [
        "val/ema/recall/T-shirt_top", "val/ema/recall/cat", "val/ema/recall/dog"]
    assert not any(measured.per_class(k) for k in ("val/recall", "val/loss", "val/ema/loss"))


def _scores():
    rng = numpy.random.default_rng(4)
    return rng.normal(size=(20, 3)), rng.integers(0, 3, 20)


def _nats(scores, labels) -> float:
    """The summed ``-log softmax(row)[label]`` of the rows, one exponential at a time."""
    return sum(math.log(sum(math.exp(v) for v in row)) - row[label]
               for row, label in zip(scores.tolist(), labels.tolist()))


def test_perplexity_of_a_split_is_the_mean_over_every_example_not_over_the_batches():
    """Batches of 7 and 2 examples: the split's cross-entropy is the sum over its 9 examples
    divided by 9, which the mean of the two batches' values is not."""
    rng = numpy.random.default_rng(6)
    scores, labels = rng.normal(size=(9, 5)) * 2, rng.integers(0, 5, 9)
    found = build(["perplexity", "bits_per_token"], "classification", Identity(), 5).compute(
        _gathered(scores, labels), "val/")
    mean = _nats(scores, labels) / 9
    assert found == pytest.approx({"val/perplexity": math.exp(mean),
                                   "val/bits_per_token": mean / math.log(2)}, rel=1e-13)
    by_batch = (math.exp(_nats(scores[:7], labels[:7]) / 7) + math.exp(_nats(scores[7:], labels[7:]) / 2)) / 2
    assert abs(by_batch - found["val/perplexity"]) > 1e-3


def test_a_sequence_models_outputs_count_each_position_as_the_flattened_split_does():
    rng = numpy.random.default_rng(7)
    scores, labels = rng.normal(size=(5, 4, 6)), rng.integers(0, 6, (5, 4))
    chosen = ["perplexity", "bits_per_token", "f1_macro", "top_2"]
    found = build(chosen, "classification", Identity(), 6).compute(
        _gathered(scores, labels, batch=3), "val/")
    flat = build(chosen, "classification", Identity(), 6).compute(
        _gathered(scores.reshape(20, 6), labels.reshape(20), batch=3), "val/")
    assert found == flat
    assert found["val/perplexity"] == pytest.approx(math.exp(_nats(scores.reshape(20, 6),
                                                                   labels.reshape(20)) / 20), rel=1e-13)
    with pytest.raises(UserCodeError, match=r"returned outputs of shape \(5, 4, 6\); "
                                            r"classification metrics read .* \(N, T, classes\) "
                                            r"for labels \(N, T\)$"):
        build(chosen, "classification", Identity(), 6).compute(
            _gathered(scores, labels[:, 0]), "val/")


def test_a_runs_logged_perplexity_is_the_exponential_of_its_mean_validation_loss(tmp_path):
    """The built-in classifier's ``val/loss`` is the mean softmax cross-entropy over the
    split's examples (in float32), so each evaluated row's ``val/perplexity`` is its
    exponential and ``val/bits_per_token`` it over ln 2."""
    trainer_run.train([*QUICK, "metrics=[perplexity,bits_per_token]"], run_dir=tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evaluated = [row for row in rows if "val/loss" in row]
    assert [row["iteration"] for row in evaluated] == [3, 6]
    for row in evaluated:
        assert row["val/perplexity"] == pytest.approx(math.exp(row["val/loss"]), rel=1e-6)
        assert row["val/bits_per_token"] == pytest.approx(row["val/loss"] / math.log(2), rel=1e-6)
