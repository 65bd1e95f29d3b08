"""A forward pass recorded for export: the functions in the order they ran, each input named
(the model's input, a parameter or persistent value by its path, a constant), in evaluation
mode whatever the model's mode, changing nothing; a forward the trace cannot follow refused in
one line."""

from __future__ import annotations

import numpy
import pytest
from export_models import backend, built, randomized

from trainer_run import functions as F
from trainer_run.errors import ConfigError
from trainer_run.export.trace import trace
from trainer_run.layers import Linear
from trainer_run.models import Model


def _kinds(step) -> list:
    return [(item.kind, item.name) if hasattr(item, "kind") else type(item.function).__name__
            for item in step.inputs]


def test_a_cnns_forward_is_its_functions_in_order_with_named_parameters():
    model = built("cnn", backend())
    x = numpy.ones((2, 3, 8, 8), numpy.float32)
    traced = trace(model, x)
    assert [type(s.function).__name__ for s in traced.steps] == [
        "Convolution2D", "MaxPooling2D", "ReLU", "Convolution2D", "MaxPooling2D", "ReLU",
        "Reshape", "Linear", "ReLU", "Linear"]
    first, flatten, last = traced.steps[0], traced.steps[6], traced.steps[-1]
    assert _kinds(first) == [("input", ""), ("param", "conv1/W"), ("param", "conv1/b")]
    assert first.inputs[0].value is x
    assert flatten.function.shape == (2, -1) and _kinds(flatten) == ["ReLU"]
    assert _kinds(last) == ["ReLU", ("param", "fc2/W"), ("param", "fc2/b")]
    assert traced.output is last
    numpy.testing.assert_array_equal(last.output.data, model.forward(x).data)


def test_the_trace_runs_in_evaluation_mode_and_changes_nothing():
    model = randomized(built("resnet", backend()))
    model.train()
    before = {k: v.data.copy() for k, v in {**model.params(), **model.persistents()}.items()}
    traced = trace(model, numpy.ones((2, 3, 8, 8), numpy.float32))
    names = [type(s.function).__name__ for s in traced.steps]
    assert "FixedBatchNormalization" in names and "BatchNormalization" not in names
    norm = traced.steps[names.index("FixedBatchNormalization")]
    assert _kinds(norm)[1:] == [("param", "block1_1/bn1/gamma"), ("param", "block1_1/bn1/beta"),
                                ("param", "block1_1/bn1/avg_mean"), ("param", "block1_1/bn1/avg_var")]
    assert model.training is True
    after = {**model.params(), **model.persistents()}
    assert all(numpy.array_equal(before[k], after[k].data) for k in before)
    assert all(p.grad is None or not p.grad.any() for p in model.params().values())


class Constants(Model):
    def __init__(self, backend):
        self.l1 = Linear(2, 2, backend)

    def forward(self, x):
        return self.l1(x) * 2.0 + numpy.array([1.0, -1.0], numpy.float32)


def test_numbers_and_arrays_a_forward_adds_are_constants():
    traced = trace(Constants(backend()), numpy.ones((3, 2), numpy.float32))
    scale, add = traced.steps[1:]
    assert scale.function.factor == 2.0
    assert _kinds(add)[0] == "Scale" and _kinds(add)[1] == ("constant", "")
    numpy.testing.assert_array_equal(add.inputs[1].value, [1.0, -1.0])


class NumpyOnInput(Constants):
    def forward(self, x):
        return self.l1(numpy.tanh(x))


class ReusedFunction(Constants):
    def forward(self, x):
        relu = F.ReLU()
        return relu(self.l1(relu(x)))


class NoForward:
    def params(self):
        return {}


@pytest.mark.parametrize(("model", "message"), [
    (NumpyOnInput, r"^NumpyOnInput.forward cannot be traced \(TypeError: .*\): export follows "
                   r"forward through trainer_run.functions and layers"),
    (ReusedFunction, r"^a ReLU object was called twice in one forward"),
    (lambda backend: NoForward(), r"^NoForward has no forward\(x\)")])
def test_a_forward_the_trace_cannot_follow_is_one_line(model, message):
    with pytest.raises(ConfigError, match=message) as refused:
        trace(model(backend()), numpy.ones((3, 2), numpy.float32))
    assert "\n" not in str(refused.value)
