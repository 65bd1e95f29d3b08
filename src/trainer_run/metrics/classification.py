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

:func:`perplexity` and :func:`bits_per_token` read the scores as logits: they are the softmax
cross-entropy against the labels (:func:`cross_entropy`, the quantity
``trainer_run.functions.softmax_cross_entropy`` computes), and also take a sequence's scores
``(N, T, V)`` against its labels ``(N, T)``, every position counting once but those labelled
:data:`IGNORED`, which the built-in language models' loss leaves out too.
"""

from __future__ import annotations

import math

import numpy

IGNORED = -1
"""The label of a position no metric of the cross-entropy counts (the language models'
``ignore_index``)."""


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


def cross_entropy(scores: numpy.ndarray, labels: numpy.ndarray) -> float:
    """The mean over every position of ``-log softmax(scores)[label]``, in nats: scores
    ``(..., V)`` (logits) against class ids of the leading shape, computed in float64 with
    each row's maximum subtracted before the exponentials (no overflow, no ``log(0)`` for a
    label far below its row's best). Positions labelled :data:`IGNORED` are left out (NaN
    when that leaves none); any other label outside ``0..V-1`` is a ValueError."""
    logits = numpy.asarray(scores, dtype=numpy.float64)
    logits = logits.reshape(-1, logits.shape[-1])
    ids = numpy.asarray(labels).reshape(-1).astype(numpy.int64)
    if ids.size != len(logits):
        raise ValueError(f"{ids.size} labels for {len(logits)} rows of scores of shape "
                         f"{numpy.shape(scores)}")
    kept = ids != IGNORED
    logits, ids = logits[kept], ids[kept]
    if not ids.size:
        return float("nan")
    if ids.min() < 0 or ids.max() >= logits.shape[1]:
        raise ValueError(f"labels must be class ids 0..{logits.shape[1] - 1} (or {IGNORED}, "
                         f"left out), got {ids.min()}..{ids.max()}")
    top = logits.max(axis=1)
    log_sum = top + numpy.log(numpy.exp(logits - top[:, None]).sum(axis=1))
    return float(numpy.mean(log_sum - logits[numpy.arange(len(ids)), ids]))


def perplexity(scores: numpy.ndarray, labels: numpy.ndarray) -> float:
    """``exp`` of the mean cross-entropy (:func:`cross_entropy`) over every position: the
    number of equally likely classes the model is as unsure as (V for a uniform model)."""
    return math.exp(cross_entropy(scores, labels))


def bits_per_token(scores: numpy.ndarray, labels: numpy.ndarray) -> float:
    """The mean cross-entropy (:func:`cross_entropy`) in bits, ``nats / ln 2``: bits per
    character with a character tokenizer (``log2(V)`` for a uniform model)."""
    return cross_entropy(scores, labels) / math.log(2)
