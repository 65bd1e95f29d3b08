"""Checking a model's gradients against finite differences: ``trainer_run.check_gradients``."""

from __future__ import annotations

import numpy

from . import host_reads
from .autograd import as_data, backward, no_grad
from .own_gradients import has_own_gradients, outputs


class GradientMismatch(AssertionError):
    """A model's gradient differs from the finite-difference estimate; the message names the
    parameter, the element and both values."""


def check_gradients(model, batch: tuple, eps: float = 1e-6, rtol: float = 1e-4,
                    atol: float = 1e-6, samples: int = 20, seed: int = 0) -> dict:
    """Compares the gradients of ``model``'s loss on ``batch`` (a tuple of arrays, as the
    model is called) with central differences ``(L(w + eps) - L(w - eps)) / 2 eps``.

    The model's parameters and the batch's float arrays are cast to float64 for the check
    (and restored after), each on its own device (NumPy or CuPy), so float32 models are
    checked precisely. Its gradients are those
    of autograd (``backward`` of its loss) or, for an own-gradient model, those of its
    ``loss_and_grads`` (:mod:`trainer_run.own_gradients`). Up to ``samples`` elements of each
    parameter (all of a smaller one) are checked, drawn with ``seed``. The loss must be
    deterministic: check a model with dropout in evaluation mode, or with its rate at 0.

    Returns, by parameter path, the largest ``|analytic - numeric| / (atol + rtol |numeric|)``
    (at most 1 passes); raises :class:`GradientMismatch` for the first element above 1.
    """
    params = model.params()
    saved = {path: p.data for path, p in params.items()}
    try:
        for p in params.values():
            p.data = p.data.astype(numpy.float64)  # a copy, on the parameter's device
        batch = tuple(_float64(a) for a in batch)
        analytic = _gradients(model, batch, params)
        rng = numpy.random.default_rng(seed)
        return {path: _check(model, batch, path, p, analytic[path], rng, eps, rtol, atol, samples)
                for path, p in params.items()}
    finally:
        for path, p in params.items():
            p.data = saved[path]
            p.grad = None


def _float64(a):
    a = a if hasattr(a, "dtype") else numpy.asarray(a)
    return a.astype(numpy.float64) if a.dtype.kind == "f" else a


def _host64(a) -> numpy.ndarray:
    """A float64 host copy of ``a`` (a NumPy or CuPy array)."""
    return numpy.array(host_reads.array(a), numpy.float64)


def _loss(model, batch) -> float:
    with no_grad():
        return float(as_data(outputs(model, batch)["loss"]))


def _gradients(model, batch, params) -> dict:
    """The model's own gradient of each parameter (zero where it gives none)."""
    if has_own_gradients(model):
        _, grads = model.loss_and_grads(*batch)
        return {path: _host64(grads[path]) if path in grads else numpy.zeros(p.data.shape)
                for path, p in params.items()}
    for p in params.values():
        p.grad = None
        p.cleargrad()
    backward(outputs(model, batch)["loss"])
    return {path: numpy.zeros(p.data.shape) if p.grad is None else _host64(p.grad)
            for path, p in params.items()}


def _check(model, batch, path, param, analytic, rng, eps, rtol, atol, samples) -> float:
    """The worst error ratio over the checked elements of one parameter."""
    size = param.data.size
    chosen = numpy.arange(size) if size <= samples else rng.choice(size, samples, replace=False)
    worst = 0.0
    for flat in chosen:
        index = numpy.unravel_index(flat, param.data.shape)
        original = param.data[index]
        param.data[index] = original + eps
        plus = _loss(model, batch)
        param.data[index] = original - eps
        minus = _loss(model, batch)
        param.data[index] = original
        numeric = (plus - minus) / (2 * eps)
        ratio = abs(analytic[index] - numeric) / (atol + rtol * abs(numeric))
        if ratio > 1:
            where = f"{path}{[int(i) for i in index]}"
            raise GradientMismatch(f"{where}: the model's gradient is {analytic[index]:.6g} and the "
                                   f"finite difference {numeric:.6g}")
        worst = max(worst, float(ratio))
    return worst
