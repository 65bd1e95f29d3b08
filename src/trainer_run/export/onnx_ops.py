"""Each traced function of :mod:`trainer_run.functions` as ONNX operators (opset
:data:`~trainer_run.export.onnx_graph.OPSET`): :data:`RULES`, applied by :func:`convert`.

- ``Linear``: ``Gemm`` (``transB=1``: ``W`` is ``(out, in)``); ``Convolution2D``: ``Conv``
  (strides, symmetric pads, dilations, groups);
- ``MaxPooling2D``, ``AveragePooling2D``: ``MaxPool``, ``AveragePool`` (``count_include_pad=1``,
  Chainer's divisor); ``GlobalAveragePooling2D``: ``GlobalAveragePool``, then ``Flatten`` to
  ``(N, C)``;
- ``FixedBatchNormalization``: ``BatchNormalization`` (inference form: the running statistics);
  ``LayerNormalization``: ``LayerNormalization`` over the last axis;
- ``ReLU``, ``Tanh``, ``Sigmoid``, ``LeakyReLU``, ``Softmax``, ``LogSoftmax``, ``Exp``, ``Log``:
  the operator of that name; ``GELU``: its tanh form ``0.5 x (1 + tanh(c (x + a x^3)))`` in
  ``Mul``, ``Add`` and ``Tanh``;
- ``Add``, ``Sub``, ``Mul``, ``Div``, ``MatMul``: the operator of that name; ``Scale``: ``Mul``
  by a constant; ``Sum``, ``Mean``: ``ReduceSum``, ``ReduceMean``;
- ``Reshape`` (an axis that follows the batch or the length copied, inferred or computed from
  the input's shape), ``Transpose``, ``Concat``: those operators; ``EmbedID``: ``Gather`` of
  the table's rows;
- ``GetItem``, ``ScaledDotProductAttention``, ``LSTM``, ``GRU``: :mod:`.onnx_sequence_ops`.

A function whose class is not in the table (the training forms ``BatchNormalization`` and
``Dropout``, the losses, a function of the user's) is refused in one line naming it. The batch
axis (and a sequence's length) is kept dynamic: a ``Reshape`` may merge the batch with the
length (a linear layer over ``(N, T, C)`` reshapes to ``(N*T, C)``) and split it back, but one
that would mix it with other axes, a reduction or a concatenation along it are refused.
"""

from __future__ import annotations

import math

from .. import functions as F
from ..errors import ConfigError
from . import onnx_sequence_ops


def convert(graph, step) -> None:
    """Adds the operators of ``step`` (a traced function, :class:`.trace.Step`) to ``graph``
    (:class:`.onnx_graph.Graph`); ConfigError naming a function the table lacks."""
    rule_of(step)(graph, step)


def rule_of(step):
    """The rule of ``step``'s function; ConfigError naming a function the table lacks."""
    rule = RULES.get(type(step.function))
    if rule is None:
        raise ConfigError(f"{type(step.function).__name__} has no ONNX form; format=onnx covers "
                          f"{', '.join(sorted(r.__name__ for r in RULES))} (in evaluation mode, "
                          "where BatchNorm uses its running statistics and Dropout is left out): "
                          "build the model from those, or export format=npz")
    return rule


def _same(op: str):
    """The rule of a function that is the ONNX operator ``op`` on the same inputs."""
    def rule(graph, step):
        graph.node(op, graph.inputs(step), step)
    return rule


def _linear(graph, step):
    graph.node("Gemm", graph.inputs(step), step, transB=1)


def _pads(f) -> list[int]:
    """ONNX's pads (begins, then ends) of a function padding ``f.p`` on both sides."""
    return [*f.p, *f.p]


def _convolution(graph, step):
    f = step.function
    graph.node("Conv", graph.inputs(step), step, strides=list(f.s), pads=_pads(f),
               dilations=list(f.d), group=f.groups)


def _max_pooling(graph, step):
    f = step.function
    graph.node("MaxPool", graph.inputs(step), step, kernel_shape=list(f.k), strides=list(f.s),
               pads=_pads(f))


def _average_pooling(graph, step):
    f = step.function
    graph.node("AveragePool", graph.inputs(step), step, kernel_shape=list(f.k), strides=list(f.s),
               pads=_pads(f), count_include_pad=1)


def _global_average_pooling(graph, step):
    pooled = graph.node("GlobalAveragePool", graph.inputs(step))
    graph.node("Flatten", [pooled], step, axis=1)


def _fixed_batch_norm(graph, step):
    graph.node("BatchNormalization", graph.inputs(step), step, epsilon=float(step.function.eps))


def _layer_norm(graph, step):
    graph.node("LayerNormalization", graph.inputs(step), step, axis=-1,
               epsilon=float(step.function.eps))


def _leaky_relu(graph, step):
    graph.node("LeakyRelu", graph.inputs(step), step, alpha=float(step.function.slope))


def _gelu(graph, step):
    (x,) = graph.inputs(step)
    cube = graph.node("Mul", [graph.node("Mul", [x, x]), x])
    inner = graph.node("Add", [x, graph.node("Mul", [graph.constant(0.044715), cube])])
    t = graph.node("Tanh", [graph.node("Mul", [graph.constant(math.sqrt(2 / math.pi)),
                                               inner])])
    half_x = graph.node("Mul", [graph.constant(0.5), x])
    graph.node("Mul", [half_x, graph.node("Add", [graph.constant(1.0), t])], step)


def _softmax(op: str):
    def rule(graph, step):
        graph.node(op, graph.inputs(step), step, axis=int(step.function.axis))
    return rule


def _scale(graph, step):
    (x,) = graph.inputs(step)
    graph.node("Mul", [x, graph.constant(step.function.factor)], step)


def _reduced_axes(graph, step) -> list[int]:
    """The axes a Sum or Mean reduces, refused when one follows the batch."""
    f, x = step.function, step.inputs[0]
    ndim = graph.ndim(x)
    axes = list(range(ndim)) if f.axis is None else [
        a % ndim for a in ((f.axis,) if isinstance(f.axis, int) else f.axis)]
    if any(graph.shape(x)[a].n for a in axes):
        raise ConfigError(f"{type(f).__name__} over axis {min(axes)} adds up the examples of a "
                          "batch: an exported model computes each example alone; reduce over "
                          "the other axes")
    return sorted(axes)


def _sum(graph, step):
    axes = graph.constant(_reduced_axes(graph, step), integers=True)
    graph.node("ReduceSum", [*graph.inputs(step), axes], step,
               keepdims=int(step.function.keepdims))


def _mean(graph, step):
    graph.node("ReduceMean", graph.inputs(step), step, axes=_reduced_axes(graph, step),
               keepdims=int(step.function.keepdims))


def _reshape(graph, step):
    x, target = step.inputs[0], graph.shape(step)
    batch = [d for d in target if d.n]
    if batch and (target[0].coef != 1 or not target[0].n or len(batch) > 1):
        raise ConfigError(f"Reshape to {tuple(step.output.shape)} mixes the batch axis with the "
                          "others: an exported model keeps axis 0 as the batch (or the batch "
                          "times the sequence's length); reshape each example (x.reshape(len(x), "
                          "...))")
    graph.node("Reshape", [*graph.inputs(step), graph.reshape_target(graph.shape(x), target)],
               step)


def _transpose(graph, step):
    f, x = step.function, step.inputs[0]
    ndim = graph.ndim(x)
    perm = list(reversed(range(ndim))) if f.axes is None else [a % ndim for a in f.axes]
    graph.node("Transpose", graph.inputs(step), step, perm=perm)


def _concat(graph, step):
    axis = step.function.axis % graph.ndim(step.inputs[0])
    if any(graph.shape(x)[axis].n for x in step.inputs):
        raise ConfigError(f"Concat along axis {axis} joins batches: an exported model keeps the "
                          "examples of a batch apart; concatenate along another axis")
    graph.node("Concat", graph.inputs(step), step, axis=axis)


def _embed_id(graph, step):
    ids, table = graph.inputs(step, integers=(0,))
    graph.node("Gather", [table, ids], step, axis=0)


RULES = {
    F.Linear: _linear, F.Convolution2D: _convolution, F.MaxPooling2D: _max_pooling,
    F.AveragePooling2D: _average_pooling, F.GlobalAveragePooling2D: _global_average_pooling,
    F.FixedBatchNormalization: _fixed_batch_norm, F.LayerNormalization: _layer_norm,
    F.ReLU: _same("Relu"), F.Tanh: _same("Tanh"), F.Sigmoid: _same("Sigmoid"),
    F.LeakyReLU: _leaky_relu, F.GELU: _gelu, F.Softmax: _softmax("Softmax"),
    F.LogSoftmax: _softmax("LogSoftmax"), F.Exp: _same("Exp"), F.Log: _same("Log"),
    F.Add: _same("Add"), F.Sub: _same("Sub"), F.Mul: _same("Mul"), F.Div: _same("Div"),
    F.MatMul: _same("MatMul"), F.Scale: _scale, F.Sum: _sum, F.Mean: _mean,
    F.Reshape: _reshape, F.Transpose: _transpose, F.Concat: _concat, F.EmbedID: _embed_id,
    **onnx_sequence_ops.RULES,
}
"""The ONNX rule of each function class (the class itself: a subclass of the user's is not
taken for its parent)."""
