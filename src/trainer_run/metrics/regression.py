"""Regression metrics of a whole split, on NumPy arrays: ``outputs`` (the model's) and
``targets``, one row per example, compared element by element once both are rows of ``D``
values (``(N,)`` and ``(N, 1)`` alike are one output). With several outputs each metric is
computed per output and averaged with equal weights, scikit-learn's
``multioutput="uniform_average"``, so each equals ``sklearn.metrics``' on the same arrays.
"""

from __future__ import annotations

import numpy


def rows(outputs: numpy.ndarray, targets: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
    """``outputs`` and ``targets`` as ``(N, D)`` float64 arrays; a ValueError when they hold
    different numbers of values per example."""
    y = numpy.asarray(outputs, dtype=numpy.float64).reshape(len(outputs), -1)
    t = numpy.asarray(targets, dtype=numpy.float64).reshape(len(targets), -1)
    if y.shape != t.shape:
        raise ValueError(f"the model's outputs have shape {numpy.shape(outputs)} and the targets "
                         f"{numpy.shape(targets)}; regression metrics compare them value by value")
    return y, t


def mae(outputs: numpy.ndarray, targets: numpy.ndarray) -> float:
    """The mean absolute error (``mean_absolute_error``)."""
    y, t = rows(outputs, targets)
    return float(numpy.mean(numpy.mean(numpy.abs(y - t), axis=0)))


def rmse(outputs: numpy.ndarray, targets: numpy.ndarray) -> float:
    """The root mean squared error of each output, averaged (``root_mean_squared_error``)."""
    y, t = rows(outputs, targets)
    return float(numpy.mean(numpy.sqrt(numpy.mean((y - t) ** 2, axis=0))))


def r2(outputs: numpy.ndarray, targets: numpy.ndarray) -> float:
    """The coefficient of determination ``1 - SS_res / SS_tot`` of each output, averaged
    (``r2_score``): an output whose targets are all equal (``SS_tot`` 0) scores 1 when it is
    predicted exactly and 0 otherwise (scikit-learn's ``force_finite``); fewer than two
    examples give NaN."""
    y, t = rows(outputs, targets)
    if len(t) < 2:
        return float("nan")
    residual = numpy.sum((t - y) ** 2, axis=0)
    total = numpy.sum((t - t.mean(axis=0)) ** 2, axis=0)
    scores = numpy.ones(t.shape[1])
    varying = total != 0
    scores[varying] = 1 - residual[varying] / total[varying]
    scores[~varying & (residual != 0)] = 0.0
    return float(numpy.mean(scores))
