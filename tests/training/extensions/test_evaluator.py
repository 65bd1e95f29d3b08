"""The evaluator's metrics (src/trainer_run/training/extensions/evaluator.py, ``metrics=``): the
model's own values are averaged over batches as before, and the chosen metrics are computed
once on the whole split (scikit-learn's values), which a mean over batches is not."""

from __future__ import annotations

import numpy
import pytest
from sklearn import metrics as sk

from trainer_run import metrics
from trainer_run.backend import get_backend
from trainer_run.data.datasets import ArrayDataset
from trainer_run.models.base import Model
from trainer_run.training.extensions import Evaluator


class Scores(Model):
    """A classifier whose outputs are its inputs."""

    def forward(self, x):
        return x


def test_metrics_are_of_the_whole_split_and_the_models_own_stay_as_they_were():
    rng = numpy.random.default_rng(5)
    x, t = rng.normal(size=(50, 4)).astype(numpy.float32), rng.integers(0, 4, 50)
    backend = get_backend("numpy", seed=0)
    measured = metrics.build(["f1_macro"], "classification", Scores(), 4)
    plain = Evaluator(ArrayDataset(x, t), Scores(), 16, backend).evaluate()
    found = Evaluator(ArrayDataset(x, t), Scores(), 16, backend, metrics=measured).evaluate()
    assert {k: found[k] for k in plain} == plain  # loss and accuracy: the same numbers
    whole = sk.f1_score(t, x.argmax(1), average="macro")
    assert found["val/f1_macro"] == pytest.approx(whole, rel=1e-12)
    batches = [sk.f1_score(t[s:s + 16], x[s:s + 16].argmax(1), average="macro")
               for s in range(0, 50, 16)]
    assert abs(numpy.mean(batches) - whole) > 1e-3  # a mean over batches would differ
    assert found["val/accuracy"] == pytest.approx(sk.accuracy_score(t, x.argmax(1)))
