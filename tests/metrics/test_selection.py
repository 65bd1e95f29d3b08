"""The config key ``metrics`` (src/trainer_run/metrics/selection.py): what each entry names and
how it is logged, and one line for each entry it refuses."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.errors import ConfigError
from trainer_run.metrics import selection

SCORES = numpy.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.4, 0.1, 0.5]])
LABELS = numpy.array([1, 2, 2, 0])


def fbeta(y_pred, y_true, beta=1.0):
    """A user's metric: beta plus the accuracy, to show the key reached it."""
    return beta + float(numpy.mean(y_pred.argmax(1) == y_true))


class Offset:
    """A user's metric class: built with the entry's keys, its instance called."""

    def __init__(self, by):
        self.by = by

    def __call__(self, y_pred, y_true):
        return {"shifted": self.by + len(y_true)}


def test_names_short_forms_mappings_and_users_targets_give_their_logged_names():
    chosen = selection.chosen(["accuracy", "top_k", "top_2", {"name": "top_k", "k": 1},
                               {"name": "f1_macro"}, "recall", "confusion_matrix",
                               {"_target_": f"{__name__}.fbeta", "beta": 2.0},
                               {"_target_": f"{__name__}.Offset", "by": 3, "name": "off"}],
                              "classification", 10)
    assert [(m.name, m.kind) for m in chosen] == [
        ("accuracy", "scalar"), ("top_5_accuracy", "scalar"), ("top_2_accuracy", "scalar"),
        ("top_1_accuracy", "scalar"), ("f1_macro", "scalar"), ("recall", "per_class"),
        ("confusion_matrix", "matrix"), ("fbeta", "users"), ("off", "users")]
    top_2, users, offset = chosen[2], chosen[7], chosen[8]
    assert top_2.compute(SCORES, LABELS) == 0.75  # row 1's label scores third of three
    assert users.compute(SCORES, LABELS) == 2.0 + 0.5  # rows 0 and 2 predicted right
    assert offset.compute(SCORES, LABELS) == {"shifted": 7}
    text = selection.chosen(["perplexity", {"name": "bits_per_token"}], "classification", 65)
    assert [(m.name, m.kind) for m in text] == [("perplexity", "scalar"), ("bits_per_token", "scalar")]
    assert text[0].compute(numpy.zeros((2, 4)), numpy.array([0, 3])) == pytest.approx(4.0, rel=1e-15)
    assert text[1].compute(numpy.zeros((2, 4)), numpy.array([0, 3])) == pytest.approx(2.0, rel=1e-15)
    assert [m.name for m in selection.chosen(["mae", "rmse", "r2"], "regression", None)] == \
        ["mae", "rmse", "r2"]
    assert selection.chosen([], "regression", None) == []


@pytest.mark.parametrize("entries, task, line", [
    ("f1_macro", "classification", "metrics must be a list of metrics (e.g. metrics=[f1_macro,top_5]), "
                                   "got 'f1_macro'"),
    (["f1"], "classification", "metrics[0]=f1 is not a metric; did you mean f1_macro or f1_micro? "
                               "choose one of accuracy, top_k, top_<k>, f1_macro"),
    (["mae", "rsme"], "regression", "metrics[1]=rsme is not a metric; did you mean rmse?"),
    (["mae"], "classification", "metrics[0]=mae is a regression metric and this run's task is "
                                "classification (dataset.task); choose among accuracy, "
                                "bits_per_token, confusion_matrix, f1_macro, f1_micro, "
                                "perplexity, precision, recall, top_k"),
    (["r2", "perplexity"], "regression", "metrics[1]=perplexity is a classification metric and "
                                         "this run's task is regression (dataset.task); choose "
                                         "among mae, r2, rmse"),
    (["bits_per_token"], "regression", "metrics[0]=bits_per_token is a classification metric and "
                                       "this run's task is regression (dataset.task); choose "
                                       "among mae, r2, rmse"),
    (["perplex"], "classification", "metrics[0]=perplex is not a metric; did you mean perplexity? "
                                    "choose one of accuracy, top_k, top_<k>, f1_macro, f1_micro, "
                                    "precision, recall, confusion_matrix, perplexity, "
                                    "bits_per_token, mae, rmse, r2, or {_target_: module.function} "
                                    "for one of yours"),
    ([{"name": "perplexity", "base": 2}], "classification", "metrics[0]: perplexity takes no "
                                                            "options, got base"),
    (["top_3"], "regression", "metrics[0]=top_k is a classification metric and this run's task is "
                              "regression (dataset.task); choose among mae, r2, rmse"),
    (["top_k"], "classification", "metrics[0]: top_k with k=5 counts every example as a hit with "
                                  "5 classes; choose k below 5"),
    ([{"name": "top_k", "k": 0}], "classification", "metrics[0].k must be >= 1, got 0"),
    ([{"name": "top_k", "n": 2}], "classification", "metrics[0]: top_k takes k alone, got n"),
    ([{"name": "recall", "k": 2}], "classification", "metrics[0]: recall takes no options, got k"),
    ([3], "classification", "metrics[0] must be a metric's name (f1_macro), {name: top_k, k: 3} or "
                            "{_target_: module.function}, got 3"),
    (["top_2", {"name": "top_k", "k": 2}], "classification", "metrics[0] and metrics[1] are both "
                                                             "logged as top_2_accuracy"),
    ([{"_target_": f"{__name__}.fbeta", "gamma": 1}], "classification",
     "metrics[0]: fbeta(y_pred, y_true, beta=1.0) cannot be called with (y_pred, y_true, gamma=): "
     "got an unexpected keyword argument 'gamma'"),
    ([{"_target_": f"{__name__}.Offset"}], "classification",
     "metrics[0]: Offset(by) cannot be built with (): missing a required argument: 'by'"),
    ([{"_target_": f"{__name__}.nothing"}], "classification",
     f"metrics[0]._target_={__name__}.nothing: {__name__} has no 'nothing'"),
    ([{"_target_": f"{__name__}.fbeta", "name": ""}], "classification",
     "metrics[0].name must be a non-empty string (how the metric is logged), got ''"),
])
def test_a_bad_entry_is_one_line_naming_it(entries, task, line):
    with pytest.raises(ConfigError) as raised:
        selection.chosen(entries, task, 5)
    assert str(raised.value).startswith(line)
    assert "\n" not in str(raised.value)


def test_a_users_metric_in_a_saved_config_is_code_the_trust_check_names():
    """A run's ``metrics`` naming a user's function is refused to anyone who did not sign or
    trust the run, as a model of theirs is (docs/trust.md)."""
    from trainer_run.runs import trust

    saved = {"metrics": ["f1_macro", {"_target_": "my_metrics.balanced", "name": "b"}]}
    assert trust.named_code(saved) == ["metrics[1]._target_=my_metrics.balanced"]
    with pytest.raises(trust.UntrustedRun, match=r"metrics\[1\]._target_=my_metrics.balanced"):
        trust.refuse_code(saved, "run r")


@pytest.mark.parametrize("metric, entries", [
    ("val/loss", []), ("val/accuracy", []), ("train/f1_macro", []), ("val/my_score", []),
    ("val/f1_macro", ["f1_macro"]), ("val/ema/f1_macro", [{"name": "f1_macro"}]),
    ("val/top_3_accuracy", ["top_3"]), ("val/top_2_accuracy", [{"name": "top_k", "k": 2}]),
    ("val/top_5_accuracy", ["top_k"]), ("val/recall/3", ["recall"]),
    ("val/perplexity", ["perplexity"]), ("val/bits_per_token", [{"name": "bits_per_token"}]),
    ("val/f1_macro", [{"_target_": "mine.f1_macro"}]), ("val/mae", [{"_target_": "m.x", "name": "mae"}]),
])
def test_an_objective_the_run_measures_or_does_not_know_is_accepted(metric, entries):
    selection.check_objective(metric, entries)


@pytest.mark.parametrize("metric, entries, fix", [
    ("val/f1_macro", [], "f1_macro; add metrics=[f1_macro]"),
    ("val/ema/f1_micro", ["accuracy"], "f1_micro; add metrics=[accuracy,f1_micro]"),
    ("val/top_3_accuracy", ["top_5"], "top_3; add metrics=[top_5,top_3]"),
    ("val/precision/2", [{"_target_": "m.p"}], "precision; add precision to metrics"),
    ("val/rmse", None, "rmse; add metrics=[rmse]"),
    ("val/perplexity", ["bits_per_token"], "perplexity; add metrics=[bits_per_token,perplexity]"),
])
def test_an_objective_naming_a_builtin_the_run_does_not_measure_is_one_line(metric, entries, fix):
    with pytest.raises(ConfigError) as refused:
        selection.check_objective(metric, entries)
    assert str(refused.value) == (f"objective.metric={metric} is not measured: the run's metrics "
                                  f"do not include {fix}")
