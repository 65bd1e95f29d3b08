"""One forward pass of a model recorded as a graph, for an exporter to translate
(:func:`trace`).

The model's ``forward`` runs once on an example batch, in evaluation mode (dropout is the
identity, batch normalization uses its running statistics), with the autograd recording: the
input is a leaf that asks for a gradient (:class:`Input`), so every function of
:mod:`trainer_run.functions` that it reaches, directly or through the layers, records itself
as its output's creator (:mod:`trainer_run.autograd`). Walking back from the output gives the
functions in an order where each comes after the functions that made its inputs
(:attr:`Trace.steps`). What a function reads that the walk does not reach through another
function is a leaf: the input (also when a function was given its array, as
:func:`~trainer_run.functions.embed_id` is), a parameter or persistent value of the model (by its
path, as ``model.npz`` names it), or a constant (an array or a Python number).

The input answers ``len``, ``shape``, ``ndim``, ``size`` and ``reshape`` as an array does
(``reshape`` through :func:`trainer_run.functions.reshape`, so it is recorded), which is what
the built-in models ask of theirs; a forward that does other NumPy work on its input cannot be
followed and is refused (:class:`~trainer_run.errors.ConfigError`, one line). Nothing of the
model changes: no gradient is computed and no running statistic is updated.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import functions as F
from ..autograd import Variable
from ..errors import ConfigError
from ..module import evaluating, persistents_of

UNTRACEABLE = (AttributeError, TypeError, ValueError, IndexError)
"""What a forward raises when it treats the traced input as an array it is not."""


class Input(Variable):
    """The traced input: a graph leaf that asks for a gradient, so the functions it reaches
    record themselves, and that answers the array questions a forward asks of its input."""

    requires_grad = True

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    def reshape(self, *shape):
        """``x.reshape(shape)``, recorded (:func:`trainer_run.functions.reshape`)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return F.reshape(self, shape)


@dataclass
class Leaf:
    """A value of the graph that no traced function made: ``kind`` is ``input``, ``param``
    (a parameter or persistent value, ``name`` its path), or ``constant``; ``value`` its
    array (or Python number)."""

    kind: str
    value: object
    name: str = ""


@dataclass
class Step:
    """One traced function: ``function`` (the Function object, its settings as attributes),
    ``inputs`` (each a :class:`Leaf` or the earlier :class:`Step` that made it) and ``output``
    (the Variable it returned)."""

    function: object
    inputs: list
    output: Variable


@dataclass
class Trace:
    """A traced forward: ``steps`` in order, ``output`` (the :class:`Step` that made what
    ``forward`` returned, or a :class:`Leaf` when no traced function made it) and ``input``
    (the :class:`Input`)."""

    steps: list
    output: object
    input: Input


def trace(model, example) -> Trace:
    """The graph of ``model.forward(example)`` (an array, a batch of the model's inputs as
    prediction gives them: normalized, in the model's dtype), run in evaluation mode; see the
    module docstring. ConfigError for a model without ``forward``, a forward the trace cannot
    follow, or a function object used twice in one pass."""
    forward = getattr(model, "forward", None)
    if not callable(forward):
        raise ConfigError(f"{type(model).__name__} has no forward(x): export traces forward, "
                          "which returns the outputs of a batch x; give the model one")
    x = Input(example)
    with evaluating(model):
        try:
            y = forward(x)
        except UNTRACEABLE as e:
            raise ConfigError(f"{type(model).__name__}.forward cannot be traced ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}): export follows forward "
                              "through trainer_run.functions and layers, and its input answers only "
                              "len, shape, ndim, size and reshape as an array; do other NumPy work "
                              "on x before calling the model, or export format=npz") from None
    if not isinstance(y, Variable):
        raise ConfigError(f"{type(model).__name__}.forward returned {type(y).__name__}, not a "
                          "Variable made by trainer_run.functions: export cannot follow it; "
                          "export format=npz")
    return _walk(y, x, _named_arrays(model))


def _named_arrays(model) -> dict:
    """The model's parameters and persistent values by ``id`` of the object and of its array,
    each with its path."""
    named = {}
    params = model.params() if callable(getattr(model, "params", None)) else {}
    for path, holder in {**params, **persistents_of(model)}.items():
        named[id(holder)] = path
        named[id(holder.data)] = path
    return named


def _walk(y: Variable, x: Input, named: dict) -> Trace:
    """The steps from the leaves to ``y``, each after those that made its inputs."""
    found, order, functions = {}, [], set()
    stack = [y]
    while stack:
        var = stack.pop()
        fn = var.creator
        if fn is None or id(var) in found:
            continue
        if id(fn) in functions:
            raise ConfigError(f"a {type(fn).__name__} object was called twice in one forward: "
                              "each call of a Function records itself, so make a new one for each "
                              "call (the functions of trainer_run.functions do)")
        step = Step(fn, [], var)
        found[id(var)] = step
        functions.add(id(fn))
        order.append(step)
        for given in fn.inputs:
            if isinstance(given, Variable) and given.creator is not None:
                step.inputs.append(given)
                stack.append(given)
            else:
                step.inputs.append(_leaf(given, x, named))
    steps = sorted(order, key=lambda s: s.output.rank)
    for step in steps:
        step.inputs = [found[id(v)] if isinstance(v, Variable) else v for v in step.inputs]
    output = found[id(y)] if y.creator is not None else _leaf(y, x, named)
    return Trace(steps, output, x)


def _leaf(value, x: Input, named: dict) -> Leaf:
    if value is x or value is x.data:
        return Leaf("input", x.data)
    if id(value) in named:
        return Leaf("param", value.data if isinstance(value, Variable) else value, named[id(value)])
    return Leaf("constant", value.data if isinstance(value, Variable) else value)
