"""Batch normalization's running statistics recomputed for given weights (PyTorch's
``torch.optim.swa_utils.update_bn``), as stochastic weight averaging needs: averaged weights
were never trained with the running statistics the model kept, so they are measured anew.

:func:`update_bn` resets every :class:`~trainer_run.layers.BatchNorm`'s ``avg_mean`` to 0 and
``avg_var`` to 1, then runs the model once over a dataset in batches, in training mode and
without a graph, with each layer's ``decay`` set to ``1 - 1/k`` for the ``k``-th batch: the
layer's own update, ``avg = decay * avg + (1 - decay) * batch_value`` (Chainer's, with the
unbiased batch variance), then makes each running statistic the mean of the batches' values,
every batch weighing the same (PyTorch's cumulative average, ``momentum=None``). Nothing of
how the layers train changes: their ``decay`` and the model's mode are put back after, and the
backend's generator too (a dropout layer draws masks during the pass, as in PyTorch's, but
the run's random stream is left where it was).
"""

from __future__ import annotations

import numpy

from .autograd import no_grad
from .converter import batch_of
from .layers import BatchNorm
from .module import Module, set_mode
from .own_gradients import outputs


def batch_norms(model) -> list[BatchNorm]:
    """The :class:`~trainer_run.layers.BatchNorm` layers of ``model``'s tree, each once."""
    found: list[BatchNorm] = []
    seen: set[int] = set()

    def walk(node) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, BatchNorm):
            found.append(node)
        for value in vars(node).values():
            if isinstance(value, Module):
                walk(value)

    if isinstance(model, Module):
        walk(model)
    return found


def update_bn(model, dataset, batch_size: int, backend=None) -> int:
    """Recomputes the running statistics of ``model``'s batch normalization layers over
    ``dataset`` in batches of ``batch_size``, in order (see the module docstring); returns the
    number of batches the statistics average (0 for a model without such layers, which is not
    run). A last batch of one example is left out: a dense layer's variance over one value
    is not defined."""
    norms = batch_norms(model)
    if not norms:
        return 0
    n = len(dataset)
    starts = [s for s in range(0, n, batch_size) if n - s >= 2 or s == 0]
    decays = [bn.decay for bn in norms]
    training = getattr(model, "training", True)
    random = backend.rng.bit_generator.state if backend is not None else None
    for bn in norms:
        bn.avg_mean.data[...] = 0
        bn.avg_var.data[...] = 1
    quiet = numpy.errstate(over="ignore", invalid="ignore", divide="ignore")
    try:
        set_mode(model, True)
        with no_grad(), quiet:
            for k, start in enumerate(starts, 1):
                for bn in norms:
                    bn.decay = 1 - 1 / k
                outputs(model, batch_of(dataset, range(start, min(start + batch_size, n)), backend))
    finally:
        for bn, decay in zip(norms, decays):
            bn.decay = decay
        set_mode(model, training)
        if random is not None:
            backend.rng.bit_generator.state = random
    return len(starts)

