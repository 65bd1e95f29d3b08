"""Each optimizer's two execution paths give the same bits: the compiled (numba) fused loop
and the NumPy array path, on one parameter (``update``) and on a fused group of several
(``fused_update``), with clipping, weight decay and a step's own gradient factor.

The values themselves are checked against MXNet's formulas in ``test_optimizers*.py``; this
file pins that the optimizer rule, written once per path, says the same thing in both.
"""

from __future__ import annotations

import numpy as np
import pytest
from state_round_trip import leaves

from trainer_run import jit
from trainer_run.optimizers import REGISTRY, create

COMMON = dict(wd=0.01, rescale_grad=0.7, clip_gradient=0.5)
CASES = {   # case -> (registered name, arguments beyond COMMON)
    "sgd": ("sgd", dict(learning_rate=0.1)),
    "sgd_momentum": ("sgd", dict(learning_rate=0.1, momentum=0.9)),
    "ccsgd": ("ccsgd", dict(learning_rate=0.1, momentum=0.9)),
    "nag": ("nag", dict(learning_rate=0.1, momentum=0.9)),
    "nag_plain": ("nag", dict(learning_rate=0.1)),
    "signum": ("signum", dict(learning_rate=0.01, momentum=0.9, wd_lh=0.1)),
    "signsgd": ("signum", dict(learning_rate=0.01)),
    "dcasgd": ("dcasgd", dict(learning_rate=0.1, momentum=0.9, lamda=0.5)),
    "dcasgd_plain": ("dcasgd", dict(learning_rate=0.1, lamda=0.5)),
    "sgld": ("sgld", dict(learning_rate=0.01)),
    "test": ("test", dict(learning_rate=0.1)),
    "adam": ("adam", dict(learning_rate=0.01)),
    "adamw": ("adamw", dict(learning_rate=0.01)),
    "adamw_no_bias_correction": ("adamw", dict(learning_rate=0.01, correct_bias=False)),
    "adamax": ("adamax", dict(learning_rate=0.01)),
    "nadam": ("nadam", dict(learning_rate=0.01)),
    "adagrad": ("adagrad", dict(learning_rate=0.1)),
    "adadelta": ("adadelta", dict(learning_rate=1.0, rho=0.9, epsilon=1e-5)),
    "rmsprop": ("rmsprop", dict(learning_rate=0.01)),
    "rmsprop_clip_weights": ("rmsprop", dict(learning_rate=0.05, clip_weights=1.0)),
    "rmsprop_centered": ("rmsprop", dict(learning_rate=0.01, centered=True, clip_weights=1.0)),
    "ftrl": ("ftrl", dict(learning_rate=0.1, lamda1=0.01, beta=1.0)),
    "ftml": ("ftml", dict(learning_rate=0.01, beta1=0.6)),
    "lamb": ("lamb", dict(learning_rate=0.01, lower_bound=0.1, upper_bound=5.0)),
    "lamb_no_bias_correction": ("lamb", dict(learning_rate=0.01, bias_correction=False)),
    "lars": ("lars", dict(learning_rate=0.5, momentum=0.9, eta=0.1, eps=1e-3)),
    "lars_plain": ("lars", dict(learning_rate=0.5, eta=0.1)),
}
SHAPES = [(3, 4), (5,), (70, 300)]


def test_every_fused_optimizer_has_a_case():
    fused = {name for name, klass in REGISTRY.items() if klass.fused_step is not None}
    assert fused == {name for name, _ in CASES.values()}


def _run(case, compiled, fused, monkeypatch):
    """Weights and state leaves after four steps, the last two with a step factor of 0.5."""
    monkeypatch.setattr(jit, "ENABLED", compiled)
    name, kw = CASES[case]
    opt = create(name, **COMMON, **kw)
    opt.set_rng(np.random.default_rng(3))
    rng = np.random.default_rng(4)
    weights = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    flat = np.concatenate([w.ravel() for w in weights])
    stops = np.cumsum([0] + [w.size for w in weights])
    segments = [slice(a, b) for a, b in zip(stops[:-1], stops[1:], strict=True)]
    views = [flat[s].reshape(w.shape) for s, w in zip(segments, weights, strict=True)]
    state = opt.create_state(0, flat) if fused else None
    states = None if fused else [opt.create_state(i, v) for i, v in enumerate(views)]
    for step in range(4):
        grad = (1.5 * rng.standard_normal(flat.size)).astype(np.float32)
        factor = 0.5 if step >= 2 else None
        if fused:
            opt.fused_update(list(range(len(views))), flat, grad, state, segments, factor)
        else:
            for i, view in enumerate(views):
                opt.update(i, view, grad[segments[i]].reshape(view.shape), states[i], factor)
    return flat, [leaf for s in ([state] if fused else states) for leaf in leaves(s)]


@pytest.mark.skipif(not jit.AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("fused", [False, True], ids=["per_index", "fused"])
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_and_array_paths_give_the_same_bits(case, fused, monkeypatch):
    weights, state = _run(case, True, fused, monkeypatch)
    expected_weights, expected_state = _run(case, False, fused, monkeypatch)
    assert np.array_equal(weights, expected_weights)
    assert len(state) == len(expected_state)
    for a, b in zip(state, expected_state, strict=True):
        assert np.array_equal(a, b)
