"""A trained model as an ONNX model of its inference graph (:func:`to_onnx`), built with the
``onnx`` package (``pip install "trainer-run[export]"``).

The graph is what :mod:`.trace` records of one forward pass in evaluation mode, each function
translated by :mod:`.onnx_ops`, with the run's input normalization at its head, so the ONNX
model takes the raw inputs :meth:`trainer_run.runner.trained.Trained.predict` takes and gives its
outputs (logits for a classifier):

- **Input** ``x``: ``(N, *in_shape)`` with a dynamic batch axis ``N``; float32 (uint8 pixels
  and other numbers are given as float32, which holds them exactly), or int64 for a run whose
  raw inputs were integers left unnormalized (an embedding's ids). Single-channel images keep
  their channel axis here.
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
  metadata holds the task, the class names (JSON) and the normalization's kind.
"""

from __future__ import annotations

import json

import numpy

from ..data import input_scaling
from ..errors import ConfigError
from . import onnx_ops
from .trace import Leaf, trace

OPSET = 17
"""The ONNX opset the graph uses."""
TRACE_BATCH = 13
"""The examples of the traced batch: a number unlikely to be any other axis's length, so a
reshape that keeps the batch axis is told from one that does not."""
INPUT, OUTPUT, BATCH = "x", "y", "N"


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
    traced on a batch of :data:`TRACE_BATCH` random raw inputs drawn with ``seed`` (see the
    module docstring); ConfigError naming a function without an ONNX form, or what else stops
    the graph."""
    onnx = onnx_module()
    example = example_batch(trained, TRACE_BATCH, numpy.random.default_rng(seed))
    traced = trace(trained.model, example)
    graph = Graph(onnx, TRACE_BATCH)
    graph.head(example, trained.in_shape, trained.normalization)
    for step in traced.steps:
        onnx_ops.convert(graph, step)
    model = onnx.helper.make_model(graph.finish(traced.output), producer_name="trainer-run",
                                   opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    model.ir_version = onnx.helper.find_min_ir_version_for(model.opset_import)
    onnx.helper.set_model_props(model, {
        "task": trained.task, "classes": json.dumps(trained.classes),
        "normalize": trained.normalization.get("kind", "none")})
    onnx.checker.check_model(model, full_check=True)
    return model


def example_batch(trained, size: int, rng) -> numpy.ndarray:
    """``size`` random raw inputs of the run (its recorded dtype and range; standard normal
    floats when it recorded none), normalized and cast as :func:`trainer_run.prediction.predict`
    feeds them to the model."""
    raw = trained.raw_inputs
    dtype = numpy.dtype(raw["dtype"]) if raw else trained.dtype
    shape = (size, *trained.in_shape)
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
    value (a :class:`.trace.Leaf` or :class:`.trace.Step`), which are integers and which have
    the batch as axis 0. ``batch`` is the traced batch's size."""

    def __init__(self, onnx, batch: int):
        self.onnx, self.batch = onnx, batch
        self.nodes, self.initializers, self.inputs_info = [], {}, []
        self.names, self.integer_names, self.batched_names = {}, set(), set()
        self.input = INPUT

    def head(self, example: numpy.ndarray, in_shape: tuple, values: dict) -> None:
        """The graph's input and the normalization ``values`` applied to it."""
        integers = example.dtype.kind != "f"
        element = self.onnx.TensorProto.INT64 if integers else self.onnx.TensorProto.FLOAT
        self.inputs_info.append(self.onnx.helper.make_tensor_value_info(
            INPUT, element, [BATCH, *in_shape]))
        name, kind = INPUT, values.get("kind")
        self.batched_names.add(name)
        if integers:
            self.integer_names.add(name)
        elif kind == "unit":
            name = self.node("Div", [name, self.constant(values["scale"], "normalization/scale")])
        elif kind == "standardize":
            centred = self.node("Sub", [name, self.constant(values["mean"], "normalization/mean")])
            name = self.node("Div", [centred, self.constant(values["std"], "normalization/std")])
        self.input = name

    def name(self, item, integer: bool = False) -> str:
        """The name of the traced value ``item``: an earlier step's output, the normalized
        input, or an initializer made for a parameter or constant (int64 with ``integer``,
        else float32)."""
        if not isinstance(item, Leaf):
            return self.names[id(item)]
        if item.kind == "input":
            return self.input
        return self.constant(item.value, item.name or None, integer)

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

    def node(self, op: str, inputs: list[str], step=None, batched: bool | None = None,
             **attributes) -> str:
        """Adds the operator ``op`` on ``inputs``; its output's name, which becomes ``step``'s
        when given. The output has the batch as axis 0 when ``batched`` says so (None: when
        an input has)."""
        output = f"{type(step.function).__name__ if step is not None else op}_{len(self.nodes)}"
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [output], **attributes))
        if batched if batched is not None else any(n in self.batched_names for n in inputs):
            self.batched_names.add(output)
        if step is not None:
            self.names[id(step)] = output
        return output

    def batched(self, item) -> bool:
        """Whether the traced value ``item`` has the batch as axis 0."""
        if isinstance(item, Leaf):
            return item.kind == "input"
        return self.names[id(item)] in self.batched_names

    @staticmethod
    def ndim(item) -> int:
        """The number of axes of the traced value ``item``."""
        return numpy.ndim(item.value) if isinstance(item, Leaf) else item.output.data.ndim

    def finish(self, output):
        """The ``onnx.GraphProto``, its output ``y`` the traced ``output``'s value."""
        name = self.name(output)
        data = numpy.asarray(output.value if isinstance(output, Leaf) else output.output.data)
        shape = [BATCH if name in self.batched_names else data.shape[0], *data.shape[1:]]
        self.nodes.append(self.onnx.helper.make_node("Identity", [name], [OUTPUT]))
        element = self.onnx.TensorProto.FLOAT if data.dtype.kind == "f" else self.onnx.TensorProto.INT64
        outputs = [self.onnx.helper.make_tensor_value_info(OUTPUT, element, shape)]
        return self.onnx.helper.make_graph(self.nodes, "trainer-run", self.inputs_info, outputs,
                                           list(self.initializers.values()))
