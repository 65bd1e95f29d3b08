"""The ONNX export of the text models against onnxruntime: a GPT (tied and untied head, with and
without biases) and an LSTM language model (one and two layers, tied and untied), exported from
int64 token ids, give in onnxruntime the logits of our ``predict`` at the traced length and of
the model's forward (evaluation mode) at other lengths and batch sizes, the batch and the length
dynamic; the recurrent layers are ONNX's LSTM and GRU operators; index and slice rules; a
forward that is another graph at another length is exported at its traced length."""

from __future__ import annotations

import json

import numpy
import onnx
import onnxruntime
import pytest
from export_models import backend, built, randomized, trained
from onnx.reference import ReferenceEvaluator

from trainer_run import functions as F
from trainer_run.autograd import no_grad
from trainer_run.export import onnx_graph
from trainer_run.layers import GRU, LSTM, Embedding, Linear
from trainer_run.models import Model
from trainer_run.models.gpt import GPT
from trainer_run.models.lstm_lm import LSTMLanguageModel
from trainer_run.module import evaluating

VOCAB, LENGTH = 11, 8
IDS = {"dtype": "uint16", "min": 0, "max": VOCAB - 1, "whole": True}
SHAPES = ((1, LENGTH), (3, LENGTH), (4, 5), (2, 1))
"""(batch, length) fed to onnxruntime: the traced length through predict, others through forward."""


def _session(proto) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(proto.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def _dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _forward(model, ids) -> numpy.ndarray:
    with no_grad(), evaluating(model):
        return model.forward(ids).data


def _assert_runs_as_the_model(model, out_shape=("N", "T", VOCAB)) -> onnx.ModelProto:
    """Exports ``model`` (trained on ids of :data:`LENGTH`), checks the graph's int64 input and
    its dynamic axes, then compares onnxruntime's outputs with the model's for :data:`SHAPES`."""
    loaded = trained(model, "none", in_shape=(LENGTH,), raw=IDS)
    model.train()  # the mode a run leaves a model in: dropout is absent from the export
    proto = onnx_graph.to_onnx(loaded)
    graph = proto.graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert _dims(graph.input[0]) == ["N", "T"] and _dims(graph.output[0]) == list(out_shape)
    assert json.loads({p.key: p.value for p in proto.metadata_props}["input_shape"]) == ["N", "T"]
    stored = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    assert all(numpy.array_equal(stored[path], p.data) for path, p in model.params().items())
    assert "Dropout" not in [node.op_type for node in graph.node]
    session = _session(proto)
    rng = numpy.random.default_rng(5)
    for n, t in SHAPES:
        ids = rng.integers(0, VOCAB, (n, t))
        expected = loaded.predict(ids.astype(numpy.uint16)) if t == LENGTH else _forward(model, ids)
        (got,) = session.run(None, {"x": ids})
        assert got.dtype == numpy.float32 and got.shape == expected.shape
        assert got.shape[:2 if out_shape[1] == "T" else 1] == (n, t)[:2 if out_shape[1] == "T" else 1]
        numpy.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return proto


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("tie", [True, False])
def test_a_gpts_logits_in_onnxruntime_are_its_own(bias, tie):
    model = randomized(GPT(VOCAB, backend(), block_size=LENGTH, n_layer=2, n_head=2, n_embd=8,
                           dropout=0.1, bias=bias, tie_weights=tie), seed=2)
    proto = _assert_runs_as_the_model(model)
    ops = [node.op_type for node in proto.graph.node]
    assert ops.count("Softmax") == ops.count("Trilu") == 2 and ops.count("LayerNormalization") == 5
    assert ("lm_head/W" in {i.name for i in proto.graph.initializer}) is not tie


def test_a_gpt_given_more_tokens_than_its_block_size_is_refused_by_onnxruntime():
    model = randomized(GPT(VOCAB, backend(), block_size=LENGTH, n_layer=1, n_head=2, n_embd=4))
    session = _session(onnx_graph.to_onnx(trained(model, "none", in_shape=(LENGTH,), raw=IDS)))
    with pytest.raises(Exception, match="(?i)broadcast|dimension|shape"):
        session.run(None, {"x": numpy.zeros((2, LENGTH + 1), numpy.int64)})


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("tie", [True, False])
def test_an_lstm_language_models_logits_in_onnxruntime_are_its_own(layers, tie):
    model = randomized(LSTMLanguageModel(VOCAB, backend(), n_embd=6, hidden_size=6 if tie else 5,
                                         num_layers=layers, dropout=0.2, tie_weights=tie))
    proto = _assert_runs_as_the_model(model)
    lstms = [node for node in proto.graph.node if node.op_type == "LSTM"]
    assert len(lstms) == layers and all(len(node.input) == 4 for node in lstms)  # no states: zeros


def test_the_lstm_gates_are_laid_out_as_onnxs_i_o_f_c():
    """One unit, each Chainer gate's input weight (a, i, f, o) a different number: the nodes
    that make the LSTM operator's W hold them in ONNX's order i, o, f, c."""
    model = LSTMLanguageModel(VOCAB, backend(), n_embd=1, hidden_size=1, num_layers=1)
    model.lstm.params()["0/W"].data[...] = [[10.0], [11.0], [12.0], [13.0]]  # a, i, f, o
    graph = onnx_graph.to_onnx(trained(model, "none", (LENGTH,), IDS)).graph
    (lstm,) = [node for node in graph.node if node.op_type == "LSTM"]
    made, wanted, nodes = {o: node for node in graph.node for o in node.output}, [lstm.input[1]], []
    while wanted:  # the nodes W is made by, from the initializers
        node = made.get(wanted.pop())
        if node is not None and node not in nodes:
            nodes.insert(0, node)
            wanted.extend(node.input)
    relayout = onnx.helper.make_model(onnx.helper.make_graph(
        nodes, "W", [], [onnx.helper.make_tensor_value_info(lstm.input[1], onnx.TensorProto.FLOAT,
                                                            None)], list(graph.initializer)),
        opset_imports=[onnx.helper.make_opsetid("", onnx_graph.OPSET)])
    (got,) = ReferenceEvaluator(relayout).run(None, {})
    assert got.shape == (1, 4, 1)
    numpy.testing.assert_array_equal(got.ravel(), [11.0, 13.0, 12.0, 10.0])


class GRULanguageModel(Model):
    """A user's model: ids through an embedding and two GRU layers, then a linear head."""

    def __init__(self, backend):
        self.embed = Embedding(VOCAB, 4, backend)
        self.gru = GRU(4, 3, backend, num_layers=2)
        self.head = Linear(3, VOCAB, backend)

    def forward(self, ids):
        return self.head(self.gru(self.embed(ids))[0], n_batch_axes=2)


def test_a_gru_is_onnxs_gru_with_the_reset_applied_after_the_product():
    proto = _assert_runs_as_the_model(randomized(GRULanguageModel(backend())))
    grus = [node for node in proto.graph.node if node.op_type == "GRU"]
    assert len(grus) == 2
    assert all(a.name != "linear_before_reset" or a.i == 1 for node in grus for a in node.attribute)


class Indexed(Model):
    """The sequence read backwards (a negative step), an LSTM, the last position's features
    but the first (an integer index and a slice, through Ellipsis), then a linear head."""

    def __init__(self, backend):
        self.embed = Embedding(VOCAB, 4, backend)
        self.lstm = LSTM(4, 5, backend)
        self.head = Linear(4, VOCAB, backend)

    def forward(self, ids):
        backwards = F.get_item(self.embed(ids), (slice(None), slice(None, None, -1)))
        hs, _ = self.lstm(backwards)
        return self.head(F.get_item(hs, (Ellipsis, -1, slice(1, None))))


def test_indices_and_slices_are_pythons_on_a_dynamic_length():
    _assert_runs_as_the_model(randomized(Indexed(backend())), out_shape=("N", VOCAB))


def test_a_forward_that_is_another_graph_at_another_length_keeps_its_traced_length():
    loaded = trained(randomized(built("embedded", backend())), "none", in_shape=(3,),
                     raw={"dtype": "int64", "min": 0, "max": 9, "whole": True})
    proto = onnx_graph.to_onnx(loaded)  # ids (N, 3), flattened into a Linear of 12 inputs
    assert _dims(proto.graph.input[0]) == ["N", 3]
    assert json.loads({p.key: p.value for p in proto.metadata_props}["input_shape"]) == ["N", 3]
    session = _session(proto)
    (got,) = session.run(None, {"x": numpy.ones((5, 3), numpy.int64)})
    numpy.testing.assert_allclose(got, loaded.predict(numpy.ones((5, 3), numpy.int64)), rtol=1e-5,
                                  atol=1e-6)
    with pytest.raises(Exception, match=r"(?is)invalid dimensions for input: x.*index: 1 Got: 2 "
                                        r"Expected: 3"):
        session.run(None, {"x": numpy.ones((5, 2), numpy.int64)})
