"""Two traces compared: each axis's two lengths solved for one length c * N^a * T^b, static when
it did not change; two traces that are not one graph said to differ, and where."""

from __future__ import annotations

import numpy
import pytest
from export_models import backend

from trainer_run import functions as F
from trainer_run.export import shapes
from trainer_run.export.shapes import Dim
from trainer_run.export.trace import trace
from trainer_run.layers import Linear
from trainer_run.models import Model

POINTS = ((13, 8), (7, 7))


@pytest.mark.parametrize(("first", "second", "dim", "text"), [
    (5, 5, Dim(5), "5"), (13, 7, Dim(1, 1), "N"), (8, 7, Dim(1, 0, 1), "T"),
    (104, 49, Dim(1, 1, 1), "N*T"), (39, 21, Dim(3, 1), "3*N"), (24, 21, Dim(3, 0, 1), "3*T"),
    (0, 0, Dim(0), "0"), (-1, -1, Dim(-1), "-1")])
def test_two_lengths_are_one_monomial_of_the_batch_and_the_length(first, second, dim, text):
    assert shapes.solve(first, second, POINTS) == dim and str(dim) == text
    assert (dim.at(POINTS[0]), dim.at(POINTS[1])) == (first, second)


def test_lengths_no_monomial_gives_are_none():
    assert shapes.solve(169, 49, POINTS) is None  # N * N
    assert shapes.solve(5, 6, POINTS) is None


class Sequence(Model):
    def __init__(self, backend):
        self.l1 = Linear(3, 2, backend)

    def forward(self, x):
        h = self.l1(x, n_batch_axes=2)
        return h * float(x.shape[1])  # a constant that follows the length


def test_the_shapes_of_two_traces_follow_n_and_t():
    model = Sequence(backend())
    a = trace(model, numpy.ones((13, 8, 3), numpy.float32))
    b = trace(model, numpy.ones((7, 7, 3), numpy.float32))
    with pytest.raises(shapes.Mismatch, match=r"^a Scale's settings differ$"):
        shapes.symbolic(a, b, POINTS)
    b = trace(model, numpy.ones((7, 8, 3), numpy.float32))
    found = shapes.symbolic(a, b, ((13, 1), (7, 1)))
    assert [str(d) for d in found.of(a.input)] == ["N", "8", "3"]
    flat, linear, back, scaled = a.steps
    assert [str(d) for d in found.of(flat)] == ["8*N", "3"]
    assert [str(d) for d in found.of(back)] == ["N", "8", "2"]
    assert found.pair(scaled) is b.steps[3] and isinstance(b.steps[3].function, F.Scale)
