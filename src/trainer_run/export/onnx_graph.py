"""A trained model as an ONNX model of its inference graph (:func:`to_onnx`), built with the
``onnx`` package (``pip install "trainer-run[export]"``).

The graph is what :mod:`.trace` records of a forward pass in evaluation mode, each function
translated by :mod:`.onnx_ops`, with the run's input normalization at its head, so the ONNX
model takes the raw inputs :meth:`trainer_run.runner.trained.Trained.predict` takes and gives its
outputs (logits for a classifier, a language model's ``(N, T, vocab)`` logits):

- **Input** ``x``: ``(N, *in_shape)`` with a dynamic batch axis ``N``; float32 (uint8 pixels
  and other numbers are given as float32, which holds them exactly), or int64 for a run whose
  raw inputs were integers left unnormalized (an embedding's ids). Single-channel images keep
  their channel axis here. Token ids, ``(N, T)`` integers, have a dynamic length ``T`` too
  when the forward is one graph at every length (a GPT up to its ``block_size``, an LSTM at
  any); a forward that is not (one that flattens its ids into a Linear) keeps the run's length.
- **Shapes**: the forward is traced twice (:func:`traces`), on :data:`TRACE_BATCHES` examples
  and for ids one shorter, and :mod:`.shapes` tells each axis that follows ``N`` or ``T``: a
  reshape's target and an index's bounds that do are computed from the input's shape in the
  graph, so no traced batch size or length is baked in.
- **Normalization**: ``unit`` divides by the scale (255 for uint8), ``standardize`` subtracts
  the mean and divides by the std, the run's own values (``normalization/scale``,
  ``normalization/mean``, ``normalization/std``).
- **Output** ``y``: ``(N, ...)``, float32.
- **Parameters** are initializers named by their path in the model (``l1/W``, as ``model.npz``
  names them), widened to float32 (exactly) for a float16 run; batch normalization's running
  statistics (``bn1/avg_mean``, ``bn1/avg_var``) likewise. Dropout is absent: the trace runs
  in evaluation mode.
- Opset :data:`OPSET` (ONNX 1.12, 2022: LayerNormalization is an operator), the lowest IR
  version that holds it; the model passes ``onnx.checker.check_model(full_check=True)``. Its
  metadata holds the task, the class names (JSON), the normalization's kind and the input's
  shape (``input_shape``, JSON: ``["N", "T"]``, or ``["N", 64]`` for a fixed length).
"""

from __future__ import annotations

import json

import numpy

from ..data import input_scaling
from ..errors import ConfigError
from . import onnx_ops, shapes
from .trace import Leaf, trace

OPSET = 17
"""The ONNX opset the graph uses."""
TRACE_BATCHES = (13, 7)
"""The examples of the two traced batches (:mod:`.shapes` tells the axes that follow them)."""
INPUT, OUTPUT = "x", "y"


def onnx_module():
    """The ``onnx`` package; ConfigError naming the extra to install when it is missing."""
    try:
        import onnx
    except ImportError:
        raise ConfigError('format=onnx needs the onnx package: pip install "trainer-run[export]"'
                          ) from None
    return onnx


def to_onnx(trained, seed: int = 0):
    """The ONNX model (``onnx.ModelProto``) of ``trained`` (:class:`trainer_run.runner.trained.Trained`),
    traced on random raw inputs drawn with ``seed`` (see the module docstring); ConfigError
    naming a function without an ONNX form, or what else stops the graph."""
    onnx = onnx_module()
    traced, found = traces(trained, numpy.random.default_rng(seed))
    graph = Graph(onnx, found)
    graph.head(traced.input, trained.normalization)
    for step in traced.steps:
        onnx_ops.convert(graph, step)
    model = onnx.helper.make_model(graph.finish(traced.output), producer_name="trainer-run",
                                   opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    model.ir_version = onnx.helper.find_min_ir_version_for(model.opset_import)
    onnx.helper.set_model_props(model, {
        "task": trained.task, "classes": json.dumps(trained.classes),
        "normalize": trained.normalization.get("kind", "none"),
        "input_shape": json.dumps(graph.declared(found.of(traced.input)))})
    onnx.checker.check_model(model, full_check=True)
    return model


def traces(trained, rng):
    """The trace of ``trained``'s forward on :data:`TRACE_BATCHES` ``[0]`` examples and the
    :class:`.shapes.Shapes` of its values, from a second trace on ``[1]`` examples: for token
    ids (integers, one axis per example of length ``T`` at least 2) of ``T - 1`` ids, so that
    the length is dynamic, or of ``T`` ids when that second trace fails or is another graph.
    ConfigError when the forward is another graph for another batch size."""
    (n1, n2), in_shape = TRACE_BATCHES, tuple(trained.in_shape)
    first = trace(trained.model, example_batch(trained, (n1, *in_shape), rng))
    for step in first.steps:
        onnx_ops.rule_of(step)
    if len(in_shape) == 1 and in_shape[0] > 1 and first.input.data.dtype.kind in "iu":
        t = in_shape[0]
        try:
            second = trace(trained.model, example_batch(trained, (n2, t - 1), rng))
            return first, shapes.symbolic(first, second, ((n1, t), (n2, t - 1)))
        except (ConfigError, shapes.Mismatch):
            pass  # the length stays the traced one
    second = trace(trained.model, example_batch(trained, (n2, *in_shape), rng))
    try:
        return first, shapes.symbolic(first, second, ((n1, 1), (n2, 1)))
    except shapes.Mismatch as e:
        raise ConfigError(f"{type(trained.model).__name__}.forward is another graph for a batch "
                          f"of {n2} than for {n1} ({e}): an exported graph serves every batch "
                          "size; let forward's functions not depend on len(x), or export "
                          "format=npz") from None


def example_batch(trained, shape: tuple, rng) -> numpy.ndarray:
    """Random raw inputs of ``shape`` (the run's recorded dtype and range; for a language
    model's run that recorded none, ids below its tokenizer's ``vocab_size``; else standard
    normal floats), normalized and cast as :func:`trainer_run.prediction.predict` feeds them to
    the model."""
    raw, tokenizer = trained.raw_inputs, getattr(trained, "tokenizer", None)
    if not raw and tokenizer is not None:
        raw = {"dtype": "int64", "min": 0, "max": tokenizer.vocab_size - 1}
    dtype = numpy.dtype(raw["dtype"]) if raw else trained.dtype
    if dtype.kind in "biu":
        low, high = (int(raw["min"]), int(raw["max"])) if raw else (0, 1)
        x = rng.integers(low, high + 1, size=shape).astype(dtype)
    else:
        x = (rng.uniform(raw["min"], raw["max"], shape) if raw else rng.standard_normal(shape))
        x = x.astype(dtype)
    x = numpy.asarray(input_scaling.transform(trained.normalization, x))
    return x.astype(trained.dtype) if x.dtype.kind == "f" else x.astype(numpy.int64)


class Graph:
    """The ONNX graph under construction: its nodes and initializers, the name of each traced
    value (a :class:`.trace.Leaf` or :class:`.trace.Step`), which are integers, and the
    symbolic shape of each (``shapes``, :class:`.shapes.Shapes`)."""

    def __init__(self, onnx, found):
        self.onnx, self.shapes = onnx, found
        self.nodes, self.initializers, self.inputs_info = [], {}, []
        self.names, self.integer_names, self.lengths = {}, set(), {}
        self.input, self.input_shape = INPUT, ()

    def head(self, x, values: dict) -> None:
        """The graph's input (the traced input ``x``) and the normalization ``values`` applied
        to it."""
        integers = x.data.dtype.kind != "f"
        element = self.onnx.TensorProto.INT64 if integers else self.onnx.TensorProto.FLOAT
        self.input_shape = self.shapes.of(x)
        self.inputs_info.append(self.onnx.helper.make_tensor_value_info(
            INPUT, element, self.declared(self.input_shape)))
        name, kind = INPUT, values.get("kind")
        if integers:
            self.integer_names.add(name)
        elif kind == "unit":
            name = self.node("Div", [name, self.constant(values["scale"], "normalization/scale")])
        elif kind == "standardize":
            centred = self.node("Sub", [name, self.constant(values["mean"], "normalization/mean")])
            name = self.node("Div", [centred, self.constant(values["std"], "normalization/std")])
        self.input = name

    @staticmethod
    def declared(shape: tuple) -> list:
        """A symbolic shape as ONNX declares it: a static length as a number, ``N``, ``T``,
        ``N*T`` ... as a name."""
        return [d.coef if d.static else str(d) for d in shape]

    def shape(self, item) -> tuple:
        """The symbolic shape of the traced value ``item`` (a tuple of :class:`.shapes.Dim`)."""
        return self.shapes.of(item)

    def name(self, item, integer: bool = False) -> str:
        """The name of the traced value ``item``: an earlier step's output, the normalized
        input, or an initializer made for a parameter or constant (int64 with ``integer``,
        else float32); a constant whose shape follows the batch is its one value expanded."""
        if not isinstance(item, Leaf):
            return self.names[id(item)]
        if item.kind == "input":
            return self.input
        shape = self.shape(item)
        if all(d.static for d in shape):
            return self.constant(item.value, item.name or None, integer)
        value = numpy.asarray(item.value).flat[0]
        return self.node("Expand", [self.constant(value, integers=integer), self.dims(shape)])

    def inputs(self, step, integers=()) -> list[str]:
        """The names of ``step``'s inputs; those at the positions ``integers`` int64, the
        others float32 (an integer input is cast)."""
        names = []
        for i, item in enumerate(step.inputs):
            name = self.name(item, i in integers)
            if name in self.integer_names and i not in integers:
                name = self.node("Cast", [name], to=self.onnx.TensorProto.FLOAT)
            names.append(name)
        return names

    def constant(self, value, name: str | None = None, integers: bool = False) -> str:
        """An initializer holding ``value`` (an array or a number) as float32, or as int64
        with ``integers``; ``name`` (a parameter's path) or a new one."""
        array = numpy.asarray(value, dtype=numpy.int64 if integers else numpy.float32)
        key = f"{name}:int64" if name and integers else name
        if key is None:
            key = f"const_{len(self.initializers)}"
        if key not in self.initializers:
            self.initializers[key] = self.onnx.numpy_helper.from_array(array, key)
        if integers:
            self.integer_names.add(key)
        return key

    def node(self, op: str, inputs: list[str], step=None, **attributes) -> str:
        """Adds the operator ``op`` on ``inputs``; its output's name, which becomes ``step``'s
        when given."""
        output = f"{type(step.function).__name__ if step is not None else op}_{len(self.nodes)}"
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [output], **attributes))
        if step is not None:
            self.names[id(step)] = output
        return output

    def length(self, dim) -> str:
        """A one-element int64 tensor holding the length ``dim`` (a :class:`.shapes.Dim`),
        computed from the input's shape when it follows ``N`` or ``T``."""
        if dim.static:
            return self.constant([dim.coef], integers=True)
        if dim not in self.lengths:
            factors = [self._axis_length(base) for base, power in
                       ((shapes.BATCH, dim.n), (shapes.LENGTH, dim.t)) if power]
            value = factors[0]
            for factor in factors[1:]:
                value = self.node("Mul", [value, factor])
            if dim.coef != 1:
                value = self.node("Mul", [value, self.constant([dim.coef], integers=True)])
            self.lengths[dim] = value
        return self.lengths[dim]

    def _axis_length(self, base) -> str:
        if base not in self.lengths:
            if "shape" not in self.lengths:
                self.lengths["shape"] = self.node("Shape", [INPUT])
            axis = self.input_shape.index(base)
            self.lengths[base] = self.node("Gather", [self.lengths["shape"], self.constant(
                [axis], integers=True)], axis=0)
        return self.lengths[base]

    def dims(self, shape: tuple) -> str:
        """A 1-D int64 tensor holding the lengths of the symbolic ``shape``."""
        if all(d.static for d in shape):
            return self.constant([d.coef for d in shape], integers=True)
        return self.node("Concat", [self.length(d) for d in shape], axis=0)

    def reshape_target(self, source: tuple, target: tuple) -> str:
        """ONNX Reshape's shape input from the symbolic shape ``source`` to ``target``: an axis
        of the length of the source's at the same place is copied (``0``), one other that
        follows ``N`` or ``T`` inferred (``-1``), and when more do, the lengths computed."""
        rest = [i for i, d in enumerate(target)
                if not d.static and not (i < len(source) and source[i] == d)]
        if len(rest) > 1:
            return self.dims(target)
        return self.constant([d.coef if d.static else 0 if i not in rest else -1
                              for i, d in enumerate(target)], integers=True)

    @staticmethod
    def ndim(item) -> int:
        """The number of axes of the traced value ``item``."""
        return numpy.ndim(item.value) if isinstance(item, Leaf) else item.output.data.ndim

    def finish(self, output):
        """The ``onnx.GraphProto``, its output ``y`` the traced ``output``'s value."""
        name = self.name(output)
        data = numpy.asarray(output.value if isinstance(output, Leaf) else output.output.data)
        self.nodes.append(self.onnx.helper.make_node("Identity", [name], [OUTPUT]))
        element = self.onnx.TensorProto.FLOAT if data.dtype.kind == "f" else self.onnx.TensorProto.INT64
        outputs = [self.onnx.helper.make_tensor_value_info(OUTPUT, element,
                                                           self.declared(self.shape(output)))]
        return self.onnx.helper.make_graph(self.nodes, "trainer-run", self.inputs_info, outputs,
                                           list(self.initializers.values()))
