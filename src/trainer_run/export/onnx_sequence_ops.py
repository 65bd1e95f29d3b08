"""The ONNX rules of the functions of sequence models (:data:`RULES`, part of
:data:`.onnx_ops.RULES`):

- ``GetItem``: ``Slice`` for the slices (Python's bounds, negative ones and clamping included;
  a bound that follows the sequence's length, as a GPT's ``wpe[0:T]``, computed from the
  input's shape), then ``Gather`` for each integer index;
- ``ScaledDotProductAttention``: ``MatMul`` of the queries and the transposed keys, ``Mul`` by
  the scale, with ``causal`` ``Add`` of the mask (-inf above the diagonal, made by ``Trilu``
  for the traced lengths or the input's), ``Softmax`` over the keys, ``MatMul`` with the values;
- ``LSTM``: ONNX's ``LSTM`` operator. Chainer's interleaved gates (column ``4 j + k`` is gate
  ``k`` of ``a, i, f, o`` for unit ``j``) are laid out in ONNX's blocks ``i, o, f, c`` in the
  graph (``Reshape``, ``Gather``, ``Transpose`` of the model's ``W``, ``U`` and ``b``, which stay
  initializers by their path, as ``model.npz`` names them); ``tanh(a)`` is ONNX's cell gate;
- ``GRU``: ONNX's ``GRU`` with ``linear_before_reset=1`` (MXNet's candidate, ``r`` times the
  recurrent product plus its bias), MXNet's blocks ``r, z, n`` laid out as ONNX's ``z, r, h``.

The recurrent operators run over the whole sequence, so the length stays dynamic; an initial
state of zeros (the layers' default) is left out, another is given to the operator.
"""

from __future__ import annotations

import math

import numpy

from .. import functions as F
from ..errors import ConfigError
from ..functions import recurrent
from .trace import Leaf

LOWEST = -(2**63)
"""ONNX Slice's end before the first element, for a negative step."""


def _get_item(graph, step):
    f, x = step.function, step.inputs[0]
    ndim = graph.ndim(x)
    key, other = (k if isinstance(k, tuple) else (k,) for k in (f.key, graph.shapes.pair(step).function.key))
    key, other = _expanded(key, ndim), _expanded(other, ndim)
    (name,) = graph.inputs(step)
    slices = [(axis, k, o) for axis, (k, o) in enumerate(zip(key, other))
              if isinstance(k, slice) and k != slice(None)]
    if slices:
        bounds = [[_bound(graph, k, o, part) for axis, k, o in slices]
                  for part in ("start", "stop", "step")]
        starts, ends, steps = (graph.node("Concat", b, axis=0) if len(b) > 1 else b[0] for b in bounds)
        axes = graph.constant([axis for axis, _, _ in slices], integers=True)
        name = graph.node("Slice", [name, starts, ends, axes, steps])
    indices = [(axis, k, o) for axis, (k, o) in enumerate(zip(key, other)) if isinstance(k, int)]
    for axis, k, o in reversed(indices):
        if k != o:
            raise ConfigError(f"GetItem's index {k} on axis {axis} follows the batch or the "
                              "sequence's length: an exported graph takes fixed indices there; "
                              "slice instead")
        name = graph.node("Gather", [name, graph.constant(k, integers=True)], axis=axis)
    graph.node("Identity", [name], step)


def _expanded(key: tuple, ndim: int) -> list:
    """``key`` with its Ellipsis (or the axes after it) as whole slices, one entry per axis."""
    if Ellipsis in key:
        at = key.index(Ellipsis)
        fill = ndim - (len(key) - 1)
        return [*key[:at], *[slice(None)] * fill, *key[at + 1:]]
    return [*key, *[slice(None)] * (ndim - len(key))]


def _bound(graph, key: slice, other: slice, part: str) -> str:
    """A one-element int64 tensor of the slice ``key``'s ``start``, ``stop`` or ``step``
    (``other``: the second trace's slice, which tells a bound that follows ``N`` or ``T``)."""
    value, second = getattr(key, part), getattr(other, part)
    negative = key.step is not None and key.step < 0
    if value is None or second is None:
        if value is not second:
            raise ConfigError(f"GetItem's slice {key} leaves a bound out for one length and not "
                              "another: an exported graph takes one slice; give its bounds")
        value = {"start": -1 if negative else 0, "stop": LOWEST if negative else 2**63 - 1,
                 "step": 1}[part]
        return graph.constant([value], integers=True)
    dim = graph.shapes.solve(value, second, f"GetItem's {part}")
    return graph.length(dim)


def _attention(graph, step):
    f = step.function
    q, k, v = graph.inputs(step)
    q_shape, k_shape = graph.shape(step.inputs[0]), graph.shape(step.inputs[1])
    scale = 1 / math.sqrt(q_shape[3].coef) if f.scale is None else f.scale
    scores = graph.node("MatMul", [q, graph.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = graph.node("Mul", [scores, graph.constant(scale)])
    if f.causal:
        scores = graph.node("Add", [scores, _causal_mask(graph, q_shape[2], k_shape[2])])
    probabilities = graph.node("Softmax", [scores], axis=-1)
    graph.node("MatMul", [probabilities, v], step)


def _causal_mask(graph, t_q, t_k) -> str:
    """``(T_q, T_k)``: 0 where query ``i`` (at position ``T_k - T_q + i``) sees key ``j``, -inf
    above that diagonal, as the function's own mask."""
    if t_q.static and t_k.static:
        mask = numpy.triu(numpy.full((t_q.coef, t_k.coef), -numpy.inf, numpy.float32),
                          k=t_k.coef - t_q.coef + 1)
        return graph.constant(mask)
    if t_q == t_k:
        diagonal = graph.constant(1, integers=True)
    else:
        offset = graph.node("Sub", [graph.length(t_k), graph.length(t_q)])
        diagonal = graph.node("Squeeze", [graph.node("Add", [offset, graph.constant(
            [1], integers=True)])])
    filled = graph.node("Expand", [graph.constant(-numpy.inf), graph.dims((t_q, t_k))])
    return graph.node("Trilu", [filled, diagonal], upper=1)


def _relaid(graph, name: str, shape: tuple, gates: int, order: list, interleaved: bool) -> str:
    """The ``(gates * H, ...)`` array ``name`` of ``shape`` as ONNX's ``(1, gates * H, ...)``
    in the gate blocks ``order`` (positions in the model's layout): the model's rows are
    ``j * gates + g`` when ``interleaved`` (Chainer's LSTM), else ``g * H + j``."""
    hidden, rest = shape[0] // gates, list(shape[1:])
    split = [hidden, gates, *rest] if interleaved else [gates, hidden, *rest]
    blocks = graph.node("Reshape", [name, graph.constant(split, integers=True)])
    chosen = graph.node("Gather", [blocks, graph.constant(order, integers=True)],
                        axis=1 if interleaved else 0)
    if interleaved:
        chosen = graph.node("Transpose", [chosen], perm=[1, 0, *range(2, 2 + len(rest))])
    return graph.node("Reshape", [chosen, graph.constant([1, shape[0], *rest], integers=True)])


def _state(graph, item) -> str:
    """An initial state for ONNX's recurrent operators: ``""`` (left out: zeros) for a
    constant of zeros, else ``(1, B, H)``."""
    if isinstance(item, Leaf) and item.kind == "constant" and not numpy.any(item.value):
        return ""
    return graph.node("Unsqueeze", [graph.name(item), graph.constant([0], integers=True)])


def _recurrent(graph, step, op: str, gates: int, order: list, interleaved: bool, biases: list,
               states: list, weights: tuple, **attributes):
    """ONNX's ``op`` over the step's ``(B, T, in)`` input: the sequence made time-major and back,
    the weights (``weights``: the positions of ``W`` and ``U``) and ``biases`` (positions, or
    None for zeros) relaid out."""
    items = step.inputs
    hidden = graph.shape(items[weights[1]])[1].coef
    w, u = ((_relaid(graph, graph.name(items[i]), tuple(d.coef for d in graph.shape(items[i])),
                     gates, order, interleaved)) for i in weights)
    parts = [_relaid(graph, graph.name(items[i]), (gates * hidden,), gates, order, interleaved)
             if i is not None else graph.constant(numpy.zeros((1, gates * hidden))) for i in biases]
    bias = graph.node("Concat", parts, axis=1)
    x = graph.node("Transpose", [graph.name(items[0])], perm=[1, 0, 2])
    initial = [_state(graph, items[i]) for i in states]
    inputs = [x, w, u, bias, "", *initial]
    while not inputs[-1]:
        inputs.pop()  # the optional inputs left out
    y = graph.node(op, inputs, hidden_size=hidden, **attributes)
    y = graph.node("Squeeze", [y, graph.constant([1], integers=True)])
    graph.node("Transpose", [y], step, perm=[1, 0, 2])


def _lstm(graph, step):
    # inputs x, h0, c0, W, U, b; ONNX's i, o, f, c are Chainer's gates 1, 3, 2, 0
    _recurrent(graph, step, "LSTM", 4, [1, 3, 2, 0], True, biases=[5, None], states=[1, 2],
               weights=(3, 4))


def _gru(graph, step):
    # inputs x, h0, W, U, b_x, b_h; ONNX's z, r, h are MXNet's blocks 1, 0, 2
    _recurrent(graph, step, "GRU", 3, [1, 0, 2], False, biases=[4, 5], states=[1], weights=(2, 3),
               linear_before_reset=1)


RULES = {F.GetItem: _get_item, F.ScaledDotProductAttention: _attention, recurrent.LSTM: _lstm,
         recurrent.GRU: _gru}
"""The rules of this module by function class."""
