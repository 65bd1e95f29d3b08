"""Adamax on a device that flushes subnormal numbers to zero (a GPU): an entry whose gradient
has been exactly zero so far (a dead ReLU unit, an unused row) stays put and finite, and every
other entry follows MXNet's formula.

MXNet divides ``m / u``, which is ``0 / 0 = NaN`` for such an entry. The library divides by 1
where ``u == 0``. A divisor built from a subnormal number (the smallest one, say) would work on
the CPU and give NaN on a GPU, whose arithmetic reads and writes subnormals as zero: the
:class:`Flushing` arrays below do the same on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from trainer_run import jit
from trainer_run.optimizers import create, get_updater

LR, BETA1, BETA2 = 0.01, 0.9, 0.999


def _flush(x):
    """``x`` with its subnormal floating numbers replaced by (signed) zeros."""
    if isinstance(x, (float, np.floating)):
        return x * 0 if abs(x) < np.finfo(type(x)).tiny else x
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return np.where(np.abs(x) < np.finfo(x.dtype).tiny, x * 0, x)
    return x


class Flushing(np.ndarray):
    """A float array whose every operation reads its operands' subnormal numbers as zero and
    writes its subnormal results as zero, as a GPU does (flush-to-zero)."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain = tuple(_flush(x.view(np.ndarray) if isinstance(x, Flushing) else x)
                      for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, Flushing) else o
                                  for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        if out is not None:
            for o in kwargs["out"]:
                o[...] = _flush(o)
            return out[0] if len(out) == 1 else out
        return _flush(result).view(Flushing) if isinstance(result, np.ndarray) else _flush(result)


def hand(w, grads, wd, rescale, clip):
    """MXNet 1.9's Adamax in float64 (``m / u`` is NaN where both are 0)."""
    w, m, u = (np.asarray(w, np.float64).copy() for _ in range(3))
    m[...] = u[...] = 0
    for t, g in enumerate(grads, start=1):
        g = rescale * np.asarray(g, np.float64) + wd * w
        if clip is not None:
            g = np.clip(g, -clip, clip)
        m = BETA1 * m + (1 - BETA1) * g
        u = np.maximum(BETA2 * u, np.abs(g))
        with np.errstate(invalid="ignore"):
            w = w - LR / (1 - BETA1 ** t) * m / u
    return w


CASES = {   # case -> (wd, rescale_grad, clip_gradient, entries whose gradient is always 0)
    "dead_units": (0.0, 1.0, None, [2, 7]),
    "rescaled_clipped": (0.0, 0.7, 0.5, [0, 5, 11]),
    "zero_weight_with_wd": (0.05, 1.0, None, [3]),    # wd * 0 adds nothing either
    "clip_zero": (0.0, 1.0, 0.0, list(range(12))),    # clip_gradient=0 zeroes every gradient
}


@pytest.mark.parametrize("listed", [False, True], ids=["per_index", "list"])
@pytest.mark.parametrize("case", list(CASES))
def test_entry_without_gradient_stays_put_on_a_flushing_device(case, listed, monkeypatch):
    monkeypatch.setattr(jit, "ENABLED", False)         # a GPU takes the array path
    wd, rescale, clip, dead = CASES[case]
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal(12).astype(np.float32)
    if wd:
        w0[dead] = 0.0
    grads = [(1.5 * rng.standard_normal(12)).astype(np.float32) for _ in range(5)]
    for g in grads:
        g[dead] = 0.0
    weight = w0.copy().view(Flushing)
    update = get_updater(create("adamax", learning_rate=LR, beta1=BETA1, beta2=BETA2, wd=wd,
                                rescale_grad=rescale, clip_gradient=clip))
    for g in grads:
        g = g.view(Flushing)
        if listed:
            update([0], [g], [weight])
        else:
            update(0, g, weight)
    weight = weight.view(np.ndarray)
    expected = hand(w0, grads, wd, rescale, clip)
    assert np.isnan(expected[dead]).all()             # what MXNet computes
    assert np.isfinite(weight).all()
    assert np.array_equal(weight[dead], w0[dead])
    live = np.setdiff1d(np.arange(12), dead)
    np.testing.assert_allclose(weight[live], expected[live].astype(np.float32), rtol=1e-5,
                               atol=1e-6)
    assert weight.dtype == np.float32


@pytest.mark.skipif(not jit.AVAILABLE, reason="numba is not installed")
def test_compiled_and_array_paths_agree_bit_for_bit_on_dead_entries(monkeypatch):
    monkeypatch.setattr(jit, "COMPILED_MIN", 0)
    results = []
    for enabled in (True, False):
        monkeypatch.setattr(jit, "ENABLED", enabled)
        rng = np.random.default_rng(6)
        weight = rng.standard_normal(40).astype(np.float32)
        update = get_updater(create("adamax", learning_rate=LR, wd=0.0, clip_gradient=0.5))
        for _ in range(4):
            g = (1.5 * rng.standard_normal(40)).astype(np.float32)
            g[::3] = 0.0
            update([0], [g], [weight])
        m, u = update.states[0]
        results.append((weight, m, u))
    for a, b in zip(*results, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(results[0][0][::3], np.random.default_rng(6).standard_normal(40)
                          .astype(np.float32)[::3])
