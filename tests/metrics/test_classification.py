"""The classification metrics (src/trainer_run/metrics/classification.py) equal scikit-learn's
on the same predictions: random scores, scores with ties (top-k ranks a tie as sklearn's stable
sort reversed does), a class never predicted, a class absent from the labels, one example.
Perplexity and bits per token equal the cross-entropy computed in a loop of ``math.exp`` and
``math.log``, a uniform model's V and log2(V), a sequence's its flattened rows', positions
labelled -1 left out."""

from __future__ import annotations

import math

import numpy
import pytest
from sklearn import metrics as sk

from trainer_run.metrics import classification as C

CLASSES = 6


def _cases():
    rng = numpy.random.default_rng(0)
    scores = rng.normal(size=(200, CLASSES))
    labels = rng.integers(0, CLASSES, 200)
    yield "random", scores, labels
    # coarse scores: many ties within a row, and with the label's own score
    yield "ties", rng.integers(0, 3, size=(200, CLASSES)).astype(float), labels
    never = scores.copy()
    never[:, 2] = -100.0  # class 2 is never predicted, though it occurs among the labels
    yield "never predicted", never, labels
    absent = numpy.where(labels == 4, 0, labels)  # class 4 is no label, though predicted
    yield "absent label", scores, absent
    yield "all equal", numpy.zeros((50, CLASSES)), rng.integers(0, CLASSES, 50)
    yield "one example", scores[:1], labels[:1]


CASES = list(_cases())
IDS = [c[0] for c in CASES]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # k >= classes
@pytest.mark.parametrize("name, scores, labels", CASES, ids=IDS)
def test_each_metric_equals_scikit_learns(name, scores, labels):
    predicted = scores.argmax(axis=1)
    everything = numpy.arange(CLASSES)
    assert C.accuracy(scores, labels) == sk.accuracy_score(labels, predicted)
    for k in (1, 2, 3, CLASSES - 1, CLASSES):
        assert C.top_k_accuracy(scores, labels, k) == pytest.approx(
            sk.top_k_accuracy_score(labels, scores, k=k, labels=everything), abs=1e-15), k
    for average in ("macro", "micro"):
        assert C.f1(scores, labels, average) == pytest.approx(
            sk.f1_score(labels, predicted, average=average, zero_division=0), abs=1e-15)
    numpy.testing.assert_allclose(C.precision(scores, labels), sk.precision_score(
        labels, predicted, labels=everything, average=None, zero_division=0), atol=1e-15)
    numpy.testing.assert_allclose(C.recall(scores, labels), sk.recall_score(
        labels, predicted, labels=everything, average=None, zero_division=0), atol=1e-15)
    numpy.testing.assert_array_equal(C.confusion_matrix(scores, labels),
                                     sk.confusion_matrix(labels, predicted, labels=everything))


def test_a_tie_ranks_the_higher_class_first_in_top_k_and_the_lower_in_the_prediction():
    """One row, classes 1 and 3 tied highest: top-1 counts class 3 (sklearn's rule), the
    predicted class (argmax, the model's accuracy) is 1; top-2 counts both."""
    scores = numpy.array([[0.0, 5.0, 1.0, 5.0]])
    assert [C.top_k_accuracy(scores, numpy.array([c]), 1) for c in (1, 3)] == [0.0, 1.0]
    assert sk.top_k_accuracy_score([3], scores, k=1, labels=range(4)) == 1.0
    assert C.accuracy(scores, numpy.array([1])) == 1.0
    assert [C.top_k_accuracy(scores, numpy.array([c]), 2) for c in (1, 3, 2)] == [1.0, 1.0, 0.0]


def test_a_hand_computed_confusion_matrix_and_its_f1():
    """Labels 0 0 1 2, predictions 0 1 1 1: F1 (2 tp / (2 tp + fp + fn)) of class 0 is 2/3,
    of 1 is 2/4, of 2 is 0."""
    scores = numpy.eye(3)[[0, 1, 1, 1]]
    labels = numpy.array([0, 0, 1, 2])
    assert C.confusion_matrix(scores, labels).tolist() == [[1, 1, 0], [0, 1, 0], [0, 1, 0]]
    assert C.f1(scores, labels, "macro") == pytest.approx((2 / 3 + 1 / 2 + 0) / 3)
    assert C.f1(scores, labels, "micro") == pytest.approx(0.5)
    assert C.precision(scores, labels).tolist() == [1.0, pytest.approx(1 / 3), 0.0]
    assert C.recall(scores, labels).tolist() == [0.5, 1.0, 0.0]


def _loop_cross_entropy(scores, labels) -> float:
    """The mean of ``-log softmax(row)[label]`` over the rows, one exponential at a time."""
    total = 0.0
    for row, label in zip(scores.tolist(), labels.tolist()):
        total += math.log(sum(math.exp(v) for v in row)) - row[label]
    return total / len(labels)


def test_perplexity_and_bits_per_token_of_hand_made_logits_are_the_loops_cross_entropy():
    scores = numpy.array([[2.0, -1.0, 0.5, 0.0], [0.1, 0.2, 0.3, 0.4], [-3.0, 4.0, 1.0, 1.0]])
    labels = numpy.array([0, 3, 2])
    nats = _loop_cross_entropy(scores, labels)
    assert C.perplexity(scores, labels) == pytest.approx(math.exp(nats), rel=1e-13)
    assert C.bits_per_token(scores, labels) == pytest.approx(nats / math.log(2), rel=1e-13)


@pytest.mark.parametrize("classes", [2, 65, 50257])
def test_a_uniform_model_has_perplexity_v_and_log2_v_bits(classes):
    scores = numpy.full((3, classes), 7.25, dtype=numpy.float32)
    labels = numpy.array([0, classes - 1, classes // 2])
    assert abs(C.perplexity(scores, labels) - classes) <= 1e-12 * classes
    assert C.bits_per_token(scores, labels) == pytest.approx(math.log2(classes), abs=1e-12)


def test_large_logits_in_float32_stay_finite_and_exact():
    """Scores of 1e4 overflow ``exp`` unless the row's maximum comes off first: a label
    1000 below its row's best costs 1000 nats."""
    scores = numpy.array([[1e4, 9e3], [9e3, 1e4]], dtype=numpy.float32)
    labels = numpy.array([1, 1])
    assert C.bits_per_token(scores, labels) == pytest.approx(
        (1000.0 + math.log1p(math.exp(-1000.0))) / 2 / math.log(2), rel=1e-12)


def test_a_sequence_counts_every_position_as_its_flattened_rows_do():
    rng = numpy.random.default_rng(5)
    scores, labels = rng.normal(size=(3, 7, 11)) * 3, rng.integers(0, 11, (3, 7))
    flat_scores, flat_labels = scores.reshape(21, 11), labels.reshape(21)
    nats = _loop_cross_entropy(flat_scores, flat_labels)
    assert C.perplexity(scores, labels) == C.perplexity(flat_scores, flat_labels)
    assert C.perplexity(scores, labels) == pytest.approx(math.exp(nats), rel=1e-13)
    assert C.bits_per_token(scores, labels) == C.bits_per_token(flat_scores, flat_labels)


def test_positions_labelled_minus_one_are_left_out_as_the_language_models_loss_leaves_them():
    rng = numpy.random.default_rng(8)
    scores, labels = rng.normal(size=(2, 5, 4)), rng.integers(0, 4, (2, 5))
    labels[0, 3:] = labels[1, 0] = -1
    kept = labels.reshape(-1) != -1
    nats = _loop_cross_entropy(scores.reshape(10, 4)[kept], labels.reshape(-1)[kept])
    assert C.perplexity(scores, labels) == pytest.approx(math.exp(nats), rel=1e-13)
    assert math.isnan(C.bits_per_token(scores[:1, 3:], labels[:1, 3:]))


@pytest.mark.parametrize("labels, line", [
    (numpy.array([0, -2]), "labels must be class ids 0..2 (or -1, left out), got -2..0"),
    (numpy.array([3, 0]), "labels must be class ids 0..2 (or -1, left out), got 0..3"),
    (numpy.array([0, 1, 2]), "3 labels for 2 rows of scores of shape (2, 3)"),
])
def test_labels_that_are_no_class_ids_of_the_scores_are_refused(labels, line):
    with pytest.raises(ValueError) as refused:
        C.perplexity(numpy.zeros((2, 3)), labels)
    assert str(refused.value) == line
