"""The ONNX export against onnxruntime: each built-in model and a user's model of the built-in
layers, exported with the run's normalization at the head of the graph, gives in onnxruntime
the outputs of our ``predict`` on the same raw inputs, for batches of several sizes; batch norm
is in its inference form and dropout absent; a function without an ONNX form is refused by
name; the graph passes onnx's checker at the opset said."""

from __future__ import annotations

import sys

import numpy
import onnx
import onnxruntime
import pytest
from export_models import backend, built, randomized, raw_inputs, trained

from trainer_run import functions as F
from trainer_run.autograd import Function
from trainer_run.errors import ConfigError
from trainer_run.export import onnx_graph
from trainer_run.layers import Linear
from trainer_run.models import Model

BATCHES = (1, 3, 20)


def _session(model_proto) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(model_proto.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def _assert_runs_as_predict(loaded, normalize: str, in_shape=None) -> onnx.ModelProto:
    """Exports ``loaded``, runs the graph in onnxruntime on raw inputs of each batch size and
    compares with ``loaded.predict`` within float32 tolerance of the outputs' scale."""
    proto = onnx_graph.to_onnx(loaded)
    session = _session(proto)
    for n in BATCHES:
        x = raw_inputs(normalize, n, seed=n, **({"in_shape": in_shape} if in_shape else {}))
        expected = loaded.predict(x)
        feed = x.astype(numpy.int64 if x.dtype.kind in "iu" and normalize == "none" else numpy.float32)
        (got,) = session.run(None, {"x": feed})
        assert got.shape == expected.shape == (n, 3) and got.dtype == numpy.float32
        scale = max(1.0, float(numpy.abs(expected).max()))
        numpy.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * scale)
    return proto


@pytest.mark.parametrize(("name", "normalize"), [
    ("mlp", "unit"), ("mlp_tanh", "none"), ("logistic_regression", "standardize"), ("cnn", "unit"),
    ("resnet", "standardize"), ("layered", "unit")])
def test_the_graph_in_onnxruntime_gives_predicts_outputs(name, normalize):
    loaded = trained(randomized(built(name, backend())), normalize)
    proto = _assert_runs_as_predict(loaded, normalize)
    assert proto.opset_import[0].version == onnx_graph.OPSET == 17
    graph = proto.graph
    assert [d.dim_param for d in graph.input[0].type.tensor_type.shape.dim[:1]] == ["N"]
    assert [d.dim_param for d in graph.output[0].type.tensor_type.shape.dim[:1]] == ["N"]
    head = {"unit": ["Div"], "standardize": ["Sub", "Div"], "none": []}[normalize]
    assert [node.op_type for node in graph.node[:len(head)]] == head
    params = {path: p.data for path, p in loaded.model.params().items()}
    stored = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    assert all(numpy.array_equal(stored[path], value) for path, value in params.items())


def test_batch_norm_is_in_inference_form_and_dropout_is_left_out():
    loaded = trained(randomized(built("layered", backend())), "unit")
    loaded.model.train()  # the mode a run leaves a model in: the export evaluates regardless
    before = {k: v.data.copy() for k, v in loaded.model.persistents().items()}
    graph = onnx_graph.to_onnx(loaded).graph
    ops = [node.op_type for node in graph.node]
    assert "Dropout" not in ops and ops.count("BatchNormalization") == 1
    (norm,) = [node for node in graph.node if node.op_type == "BatchNormalization"]
    assert norm.input[3:] == ["bn/avg_mean", "bn/avg_var"]  # the running statistics
    assert all(a.name != "training_mode" or a.i == 0 for a in norm.attribute)
    assert loaded.model.training is True  # its mode back, its statistics untouched
    assert all(numpy.array_equal(before[k], v.data) for k, v in loaded.model.persistents().items())


def test_ids_through_an_embedding_are_an_int64_input():
    raw = {"dtype": "int64", "min": 0, "max": 9, "whole": True}
    loaded = trained(randomized(built("embedded", backend())), "none", in_shape=(3,), raw=raw)
    proto = onnx_graph.to_onnx(loaded)
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    x = numpy.random.default_rng(0).integers(0, 10, (5, 3))
    (got,) = _session(proto).run(None, {"x": x})
    numpy.testing.assert_allclose(got, loaded.predict(x), rtol=1e-5, atol=1e-6)


class Cube(Function):
    def forward(self, x):
        return x * x * x


class WithOwnFunction(Model):
    def __init__(self, backend):
        self.l1 = Linear(4, 3, backend)

    def forward(self, x):
        return Cube()(self.l1(x))


class WithTrainingDropout(WithOwnFunction):
    def forward(self, x):
        return F.dropout(self.l1(x), 0.5)


class MergingBatch(WithOwnFunction):
    def forward(self, x):
        return F.reshape(self.l1(x), (-1,))


@pytest.mark.parametrize(("model", "message"), [
    (WithOwnFunction, r"^Cube has no ONNX form; format=onnx covers .*Linear.*: build the model from "
                      r"those, or export format=npz$"),
    (WithTrainingDropout, r"^Dropout has no ONNX form;"),
    (MergingBatch, r"^Reshape to \(39,\) mixes the batch axis with the others")])
def test_a_function_without_an_onnx_form_is_refused_by_name(model, message):
    loaded = trained(model(backend()), "none", in_shape=(4,))
    with pytest.raises(ConfigError, match=message):
        onnx_graph.to_onnx(loaded)


def test_without_the_onnx_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    loaded = trained(built("logistic_regression", backend()), "unit")
    with pytest.raises(ConfigError, match=r'^format=onnx needs the onnx package: pip install '
                                          r'"trainer-run\[export\]"$'):
        onnx_graph.to_onnx(loaded)
