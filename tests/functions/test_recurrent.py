"""LSTM and GRU over sequences (functions/recurrent.py): outputs and final states against a
hand-written step recursion in NumPy float64 (the gates picked out of the pre-activation by
strided slices for Chainer's per-unit layout, by blocks for MXNet's), gradients of every input
against central finite differences, the final cell state detached, bad shapes refused, and CuPy
against NumPy."""

import numpy as np
import pytest
from gpu_helpers import backend, host
from gradients import check_grads

from trainer_run.autograd import backward
from trainer_run.functions.recurrent import gru, lstm
from trainer_run.params import Parameter

B, T, IN, H = 2, 4, 3, 5


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def lstm_reference(x, h, c, W, U, b):
    """Chainer's ``F.lstm`` step by step: column ``4 j + k`` of the pre-activation is gate ``k``
    (a, i, f, o) of unit ``j``."""
    hs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ W.T + b + h @ U.T
        a, i, f, o = np.tanh(z[:, 0::4]), _sigmoid(z[:, 1::4]), _sigmoid(z[:, 2::4]), _sigmoid(z[:, 3::4])
        c = a * i + f * c
        h = o * np.tanh(c)
        hs.append(h)
    return np.stack(hs, axis=1), c


def gru_reference(x, h, W, U, b_x, b_h):
    """MXNet's GRU step by step: the gates r, z, n in blocks of H."""
    H = U.shape[1]
    Wr, Wz, Wn = W[:H], W[H:2 * H], W[2 * H:]
    Ur, Uz, Un = U[:H], U[H:2 * H], U[2 * H:]
    bxr, bxz, bxn = b_x[:H], b_x[H:2 * H], b_x[2 * H:]
    bhr, bhz, bhn = b_h[:H], b_h[H:2 * H], b_h[2 * H:]
    hs = []
    for t in range(x.shape[1]):
        xt = x[:, t]
        r = _sigmoid(xt @ Wr.T + bxr + h @ Ur.T + bhr)
        z = _sigmoid(xt @ Wz.T + bxz + h @ Uz.T + bhz)
        n = np.tanh(xt @ Wn.T + bxn + r * (h @ Un.T + bhn))
        h = (1 - z) * n + z * h
        hs.append(h)
    return np.stack(hs, axis=1)


def lstm_inputs(rng):
    return [rng.normal(size=(B, T, IN)), rng.normal(size=(B, H)), rng.normal(size=(B, H)),
            rng.normal(size=(4 * H, IN)), rng.normal(size=(4 * H, H)) * 0.5, rng.normal(size=4 * H)]


def gru_inputs(rng):
    return [rng.normal(size=(B, T, IN)), rng.normal(size=(B, H)), rng.normal(size=(3 * H, IN)),
            rng.normal(size=(3 * H, H)) * 0.5, rng.normal(size=3 * H), rng.normal(size=3 * H)]


@pytest.mark.parametrize("with_state", [True, False])
def test_lstm_equals_the_step_recursion(rng, with_state):
    x, h0, c0, W, U, b = lstm_inputs(rng)
    if not with_state:
        h0 = c0 = None
    zeros = np.zeros((B, H))
    hs, c_T = lstm(x, h0, c0, W, U, b)
    expected_hs, expected_c = lstm_reference(x, zeros if h0 is None else h0, zeros if c0 is None else c0,
                                             W, U, b)
    assert hs.shape == (B, T, H) and c_T.shape == (B, H)
    np.testing.assert_allclose(hs.data, expected_hs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(c_T, expected_c, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("with_state", [True, False])
def test_gru_equals_the_step_recursion(rng, with_state):
    x, h0, W, U, b_x, b_h = gru_inputs(rng)
    hs = gru(x, h0 if with_state else None, W, U, b_x, b_h)
    expected = gru_reference(x, h0 if with_state else np.zeros((B, H)), W, U, b_x, b_h)
    np.testing.assert_allclose(hs.data, expected, rtol=1e-6, atol=1e-6)


def test_lstm_reads_the_gates_per_unit():
    # Only the forget gate's bias of unit 0 (column 2) is large: unit 0 keeps its cell state,
    # the others forget half of it, whatever the block layout would have read.
    W, U = np.zeros((4 * H, IN)), np.zeros((4 * H, H))
    b = np.zeros(4 * H)
    b[2] = 50.0
    c0 = np.ones((1, H))
    _, c_T = lstm(np.zeros((1, 1, IN)), np.zeros((1, H)), c0, W, U, b)
    np.testing.assert_allclose(c_T, [[1.0] + [0.5] * (H - 1)], rtol=1e-12)


def test_lstm_gradients_match_finite_differences(rng):
    check_grads(lambda *a: lstm(*a)[0], lstm_inputs(rng), wrt={0, 1, 2, 3, 4, 5})


def test_gru_gradients_match_finite_differences(rng):
    check_grads(gru, gru_inputs(rng), wrt={0, 1, 2, 3, 4, 5})


def test_the_weights_alone_get_gradients_and_the_final_cell_state_is_detached(rng):
    x, h0, c0, W, U, b = lstm_inputs(rng)
    params = [Parameter(a.copy()) for a in (W, U, b)]
    hs, c_T = lstm(x, h0, c0, *params)
    assert not hasattr(c_T, "creator")  # a plain array
    backward(hs, gy=np.ones_like(hs.data))
    assert all(p.grad is not None and p.grad.shape == p.data.shape for p in params)


def test_bad_shapes_are_refused(rng):
    x, h0, c0, W, U, b = lstm_inputs(rng)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, time, features\)"):
        lstm(x[0], h0, c0, W, U, b)
    with pytest.raises(ValueError, match=r"W must have shape \(20, 3\)"):
        lstm(x, h0, c0, W[:, :2], U, b)
    with pytest.raises(ValueError, match=r"U must have shape \(4 \* H, H\)"):
        lstm(x, h0, c0, W, U[:15], b)
    with pytest.raises(ValueError, match=r"c0 must have shape \(2, 5\), got \(2, 4\)"):
        lstm(x, h0, c0[:, :4], W, U, b)
    x, h0, W, U, b_x, b_h = gru_inputs(rng)
    with pytest.raises(ValueError, match=r"b_h must have shape \(15,\)"):
        gru(x, h0, W, U, b_x, b_h[:3])


def _forward_backward(device, fn, arrays):
    b = backend(device, dtype="float32")
    inputs = [Parameter(b.asarray(a.astype(np.float32))) for a in arrays]
    hs = fn(*inputs)
    c = np.random.default_rng(6).normal(size=hs.shape).astype(np.float32)
    backward(hs, gy=b.asarray(c))
    return [host(hs.data)] + [host(p.grad) for p in inputs]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_cupy_equals_numpy(name):
    fn, arrays = {"lstm": (lambda *a: lstm(*a)[0], lstm_inputs), "gru": (gru, gru_inputs)}[name]
    arrays = arrays(np.random.default_rng(5))
    for got, expected in zip(_forward_backward("cupy", fn, arrays), _forward_backward("numpy", fn, arrays)):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=3e-6)


def test_the_lstm_steps_run_on_one_blas_thread_and_the_count_comes_back(rng, monkeypatch):
    from trainer_run import blas_threads
    from trainer_run.functions import recurrent

    if blas_threads.use(2) != 2:
        pytest.skip("NumPy's BLAS takes no second thread here")
    seen = []
    for name in ("_steps", "_back_steps"):
        original = getattr(recurrent.LSTM, name)

        def spy(self, *a, original=original):
            seen.append(blas_threads.current())
            return original(self, *a)

        monkeypatch.setattr(recurrent.LSTM, name, spy)
    try:
        x, h0, c0, W, U, b = lstm_inputs(rng)
        hs, _ = lstm(x, h0, c0, *[Parameter(a) for a in (W, U, b)])
        backward(hs, gy=np.ones_like(hs.data))
        assert seen == [1, 1] and blas_threads.current() == 2
    finally:
        blas_threads.restore()
