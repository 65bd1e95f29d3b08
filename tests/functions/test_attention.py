"""Scaled dot-product attention (functions/attention.py): values against an explicit loop over
batch, head and positions, causality (later positions leave earlier outputs bit for bit), the
gradients of q, k and v against central differences, the one (B, H, T, T) array kept for the
backward, and the same on CuPy."""

import math

import numpy as np
import pytest
from gpu_helpers import backend, host
from gradients import check_grads

from trainer_run.autograd import backward
from trainer_run.functions import ScaledDotProductAttention, scaled_dot_product_attention
from trainer_run.params import Parameter

B, H, T, D = 2, 2, 5, 4


def _qkv(rng, t_q=T, t_k=T):
    return (rng.normal(size=(B, H, t_q, D)), rng.normal(size=(B, H, t_k, D)),
            rng.normal(size=(B, H, t_k, D)))


def naive_attention(q, k, v, causal, scale=None):
    """The definition, one score at a time with math.exp (queries at the last T_q positions)."""
    b_, h_, t_q, d = q.shape
    t_k = k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = np.zeros((b_, h_, t_q, v.shape[3]))
    for b in range(b_):
        for h in range(h_):
            for t in range(t_q):
                seen = [s for s in range(t_k) if not causal or s <= t_k - t_q + t]
                scores = [sum(q[b, h, t, i] * k[b, h, s, i] for i in range(d)) * scale for s in seen]
                top = max(scores)
                weights = [math.exp(x - top) for x in scores]
                total = sum(weights)
                for w, s in zip(weights, seen):
                    out[b, h, t] += w / total * v[b, h, s]
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_forward_equals_the_loop_definition(rng, causal):
    q, k, v = _qkv(rng)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, causal=causal).data,
                               naive_attention(q, k, v, causal), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, causal=causal, scale=0.3).data,
                               naive_attention(q, k, v, causal, scale=0.3), rtol=1e-6, atol=1e-6)


def test_queries_of_the_last_positions_against_longer_keys(rng):
    # A query of new tokens against cached keys: the causal mask's diagonal is shifted.
    q, k, v = _qkv(rng, t_q=2)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v).data,
                               naive_attention(q, k, v, causal=True), rtol=1e-6, atol=1e-6)
    full_q = np.concatenate([rng.normal(size=(B, H, T - 2, D)), q], axis=2)
    np.testing.assert_allclose(scaled_dot_product_attention(full_q, k, v).data[:, :, -2:],
                               scaled_dot_product_attention(q, k, v).data, rtol=1e-12, atol=1e-12)


def test_large_scores_do_not_overflow(rng):
    q, k, v = _qkv(rng)
    y = scaled_dot_product_attention(q * 1e3, k * 1e3, v).data
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, naive_attention(q * 1e3, k * 1e3, v, True), rtol=1e-6, atol=1e-6)


def test_later_positions_leave_earlier_outputs_bit_identical(rng):
    q, k, v = _qkv(rng)
    y = scaled_dot_product_attention(q, k, v).data
    for t in range(T - 1):
        changed = [a.copy() for a in (q, k, v)]
        for a in changed:
            a[:, :, t + 1:] = rng.normal(size=a[:, :, t + 1:].shape) * 10
        y2 = scaled_dot_product_attention(*changed).data
        np.testing.assert_array_equal(y2[:, :, :t + 1], y[:, :, :t + 1])
        assert not np.array_equal(y2[:, :, t + 1:], y[:, :, t + 1:])


@pytest.mark.parametrize("causal", [True, False])
def test_gradients_match_finite_differences(rng, causal):
    arrays = list(_qkv(rng))
    f = lambda q, k, v: scaled_dot_product_attention(q, k, v, causal=causal)  # noqa: E731
    check_grads(f, arrays, wrt={0, 1, 2})
    check_grads(f, arrays, wrt={1})
    check_grads(lambda q, k, v: scaled_dot_product_attention(q, k, v, causal=causal, scale=0.7),
                arrays, wrt={0, 2})


def test_the_backward_keeps_one_scores_sized_array(rng):
    fn = ScaledDotProductAttention()
    y = fn(*(Parameter(a) for a in _qkv(rng)))
    kept = [name for name, value in vars(fn).items()
            if isinstance(value, np.ndarray) and value.shape == (B, H, T, T)]
    assert len(kept) == 1, kept
    backward(y, gy=np.ones(y.shape))


def test_float32_stays_float32(rng):
    q, k, v = (a.astype(np.float32) for a in _qkv(rng))
    y = scaled_dot_product_attention(q, k, v)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.data, naive_attention(q, k, v, True), rtol=1e-5, atol=1e-6)


def test_bad_shapes_are_refused(rng):
    q, k, v = _qkv(rng)
    with pytest.raises(ValueError, match="needs q"):
        scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="T_q <= T_k"):
        scaled_dot_product_attention(q, k[:, :, :3], v[:, :, :3])


def forward_backward(device):
    b = backend(device, dtype="float32")
    arrays = [a.astype(np.float32) for a in _qkv(np.random.default_rng(5))]
    inputs = [Parameter(b.asarray(a)) for a in arrays]
    y = scaled_dot_product_attention(*inputs)
    c = np.random.default_rng(6).normal(size=y.shape).astype(np.float32)
    backward(y, gy=b.asarray(c))
    return [host(y.data)] + [host(p.grad) for p in inputs]


@pytest.mark.gpu
def test_cupy_equals_numpy():
    for got, expected in zip(forward_backward("cupy"), forward_backward("numpy")):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=3e-6)
