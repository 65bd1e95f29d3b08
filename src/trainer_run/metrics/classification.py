"""Classification metrics of a whole split, on NumPy arrays: ``scores`` ``(N, C)`` (the model's
outputs, logits or probabilities: only their order in a row counts) and ``labels`` ``(N,)``
(class ids ``0..C-1``). Each equals scikit-learn's on the same inputs:

- the predicted class of a row is its highest score, the lowest id among equal ones
  (``numpy.argmax``), as the model's own ``accuracy`` takes it;
- :func:`top_k_accuracy` ranks a row's classes as ``sklearn.metrics.top_k_accuracy_score``
  does (a stable sort, reversed): among equal scores the *higher* id ranks first, so with
  ties ``top_k`` with ``k=1`` may differ from :func:`accuracy`;
- :func:`f1` averages over the classes that occur among the labels or the predictions
  (scikit-learn's ``labels=None``); :func:`precision` and :func:`recall` give every class
  ``0..C-1``, and a class with nothing to divide by (never predicted, never a label) scores
  0 (scikit-learn's ``zero_division`` default, without its warning).
"""

from __future__ import annotations

import numpy


def predicted(scores: numpy.ndarray) -> numpy.ndarray:
    """The predicted class of each row: its highest score, the lowest id among equal ones."""
    return numpy.argmax(scores, axis=1)


def accuracy(scores: numpy.ndarray, labels: numpy.ndarray) -> float:
    """The fraction of rows whose predicted class is their label (``accuracy_score``)."""
    return float(numpy.mean(predicted(scores) == labels))


def top_k_accuracy(scores: numpy.ndarray, labels: numpy.ndarray, k: int) -> float:
    """The fraction of rows whose label is among their ``k`` highest scores
    (``top_k_accuracy_score(labels, scores, k=k, labels=range(C))``; ties as the module
    says). The label's rank is the number of classes before it: those of a higher score,
    and those of an equal score and a higher id."""
    rows = numpy.arange(len(labels))
    own = scores[rows, labels][:, None]
    ids = numpy.arange(scores.shape[1])
    before = (scores > own) | ((scores == own) & (ids[None, :] > labels[:, None]))
    return float(numpy.mean(before.sum(axis=1) < k))


def confusion_matrix(scores: numpy.ndarray, labels: numpy.ndarray) -> numpy.ndarray:
    """``(C, C)`` counts (int64): row ``i``, column ``j`` holds the examples of class ``i``
    predicted as ``j`` (``confusion_matrix(labels, predicted, labels=range(C))``)."""
    classes = scores.shape[1]
    pairs = labels.astype(numpy.int64) * classes + predicted(scores)
    return numpy.bincount(pairs, minlength=classes * classes).reshape(classes, classes)


def _ratio(top: numpy.ndarray, bottom: numpy.ndarray) -> numpy.ndarray:
    """``top / bottom`` element by element, 0 where ``bottom`` is 0."""
    return numpy.divide(top, bottom, out=numpy.zeros(len(top)), where=bottom != 0)


def precision(scores: numpy.ndarray, labels: numpy.ndarray) -> numpy.ndarray:
    """Each class's precision (``precision_score(..., labels=range(C), average=None)``):
    of the examples predicted as the class, the fraction that are of it."""
    matrix = confusion_matrix(scores, labels)
    return _ratio(numpy.diag(matrix).astype(numpy.float64), matrix.sum(axis=0))


def recall(scores: numpy.ndarray, labels: numpy.ndarray) -> numpy.ndarray:
    """Each class's recall (``recall_score(..., labels=range(C), average=None)``), its
    per-class accuracy: of the examples of the class, the fraction predicted as it."""
    matrix = confusion_matrix(scores, labels)
    return _ratio(numpy.diag(matrix).astype(numpy.float64), matrix.sum(axis=1))


def f1(scores: numpy.ndarray, labels: numpy.ndarray, average: str) -> float:
    """F1 (``f1_score(labels, predicted, average=average)``): ``macro``, the mean of each
    occurring class's ``2 tp / (2 tp + fp + fn)``; ``micro``, the same of the counts summed
    over those classes (which equals the accuracy)."""
    matrix = confusion_matrix(scores, labels)
    tp = numpy.diag(matrix).astype(numpy.float64)
    fp, fn = matrix.sum(axis=0) - tp, matrix.sum(axis=1) - tp
    occurring = (matrix.sum(axis=0) + matrix.sum(axis=1)) > 0
    tp, fp, fn = tp[occurring], fp[occurring], fn[occurring]
    if average == "micro":
        tp, fp, fn = tp.sum(keepdims=True), fp.sum(keepdims=True), fn.sum(keepdims=True)
    elif average != "macro":
        raise ValueError(f"average must be 'macro' or 'micro', got {average!r}")
    return float(numpy.mean(_ratio(2 * tp, 2 * tp + fp + fn))) if len(tp) else 0.0
