"""Models that compute their loss and gradients themselves, in plain NumPy or CuPy.

The protocol: besides ``params()`` (as for every model), such a model has

    loss_and_grads(*batch) -> (metrics, grads)

where ``metrics`` is a dict with ``"loss"`` (a scalar: the mean loss over the batch's
examples) and any further scalar metrics, and ``grads`` maps parameter paths (the keys of
``params()``) to the gradients of that loss, each of its parameter's shape. A parameter
missing from ``grads`` gets no gradient from the batch. It needs no ``__call__``.

:func:`outputs` turns its result into what an autograd model returns: the loss becomes a
graph node whose backward hands each parameter its gradient times the output gradient. So
the updaters treat both kinds alike: gradient accumulation (each batch's weight), loss
scaling (the scale), parallel replicas (each replica's own call) and the kvstore all apply
to the gradients the model gave. Validation and the test split read the metrics of
``loss_and_grads`` (its gradients are not used).
"""

from __future__ import annotations

from .autograd import Function
from .backend import array_module
from .errors import check


def has_own_gradients(model) -> bool:
    """Whether ``model`` follows the protocol above (has ``loss_and_grads``)."""
    return callable(getattr(model, "loss_and_grads", None))


def outputs(model, batch: tuple) -> dict:
    """The model's metrics on ``batch`` with ``"loss"`` as a graph node: for an own-gradient
    model, a node carrying its gradients; for any other model, its call as it is."""
    if not has_own_gradients(model):
        out = model(*batch)
        return dict(out) if isinstance(out, dict) else {"loss": out}
    metrics, grads = model.loss_and_grads(*batch)
    check(isinstance(metrics, dict) and "loss" in metrics,
          f"{type(model).__name__}.loss_and_grads must return (metrics, grads) with "
          "metrics['loss']")
    params = model.params()
    for path in grads:
        check(path in params, f"{type(model).__name__}.loss_and_grads gave a gradient for {path!r}, "
              f"which is not a parameter path of its params() ({', '.join(params)})")
    paths = [path for path in params if path in grads]
    for path in paths:
        check(tuple(grads[path].shape) == tuple(params[path].shape),
              f"{type(model).__name__}.loss_and_grads: the gradient of {path!r} has shape "
              f"{tuple(grads[path].shape)} and the parameter {tuple(params[path].shape)}")
    first = next(iter(params.values()))
    xp = array_module(first.data)
    loss = xp.asarray(metrics["loss"], dtype=first.data.dtype)
    node = GivenGradients(loss, [grads[p] for p in paths])(*(params[p] for p in paths))
    return {**metrics, "loss": node}


class GivenGradients(Function):
    """A loss computed outside the graph: its inputs are the parameters it depends on, its
    output the given ``loss``, its backward ``gy`` times each given gradient."""

    def __init__(self, loss, grads: list):
        self.loss = loss
        self.grads = grads

    def forward(self, *params):
        return self.loss

    def backward(self, gy):
        return tuple(g * gy.astype(g.dtype) if need else None
                     for g, need in zip(self.grads, self.needs))
