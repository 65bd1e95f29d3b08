"""The regression metrics (src/trainer_run/metrics/regression.py) equal scikit-learn's,
one output and several (averaged with equal weights), a constant target (R² 1 when predicted
exactly, else 0: sklearn's force_finite), an output of shape (N, 1) against targets (N,)."""

from __future__ import annotations

import numpy
import pytest
from sklearn import metrics as sk

from trainer_run.metrics import regression as R


def _cases():
    rng = numpy.random.default_rng(1)
    t = rng.normal(size=(100, 3))
    yield "three outputs", t + 0.3 * rng.normal(size=t.shape), t
    yield "one output", t[:, 0] + rng.normal(size=100), t[:, 0]
    constant = t.copy()
    constant[:, 1] = 2.0
    guess = constant + 0.1 * rng.normal(size=t.shape)
    guess[:, 2] = constant[:, 2]  # predicted exactly
    yield "constant and exact columns", guess, constant
    exact = numpy.full((10, 1), 4.0)
    yield "constant predicted exactly", exact, exact[:, 0].copy()


CASES = list(_cases())


@pytest.mark.parametrize("name, y, t", CASES, ids=[c[0] for c in CASES])
def test_each_metric_equals_scikit_learns(name, y, t):
    t_rows = t.reshape(len(t), -1)
    y_rows = y.reshape(len(y), -1)
    assert R.mae(y, t) == pytest.approx(sk.mean_absolute_error(t_rows, y_rows), rel=1e-13)
    assert R.rmse(y, t) == pytest.approx(sk.root_mean_squared_error(t_rows, y_rows), rel=1e-13)
    assert R.r2(y, t) == pytest.approx(sk.r2_score(t_rows, y_rows), rel=1e-13, abs=1e-15)


def test_outputs_of_another_size_than_the_targets_are_refused_naming_both_shapes():
    with pytest.raises(ValueError, match=r"outputs have shape \(4, 2\) and the targets \(4,\)"):
        R.mae(numpy.zeros((4, 2)), numpy.zeros(4))


def test_r2_of_one_example_is_nan_as_scikit_learn_says():
    assert numpy.isnan(R.r2(numpy.ones(1), numpy.zeros(1)))
