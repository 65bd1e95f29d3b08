"""The losses and accuracy (functions/loss.py): values by hand, gradients against finite differences,
float32 kept, and the mean NumPy's to the bit."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import backward
from trainer_run.params import Parameter


def test_softmax_cross_entropy_grad(rng):
    x = rng.normal(size=(6, 4)) * 2
    t = rng.integers(0, 4, size=6)
    check_grads(F.softmax_cross_entropy, [x, t], wrt={0})


def test_mean_squared_error_grad(rng):
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    check_grads(F.mean_squared_error, [a, b], wrt={0, 1})
    np.testing.assert_allclose(F.mean_squared_error(a, b).data, np.mean((a - b) ** 2))


def test_accuracy_by_hand():
    y = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    t = np.array([1, 1, 1, 0])
    # argmax rows: 1, 0, 1, 0 -> rows 0, 2, 3 are right
    assert F.accuracy(y, t) == pytest.approx(3 / 4)
    assert F.accuracy(Parameter(y), t) == pytest.approx(3 / 4)


def test_softmax_cross_entropy_value(rng):
    x = rng.normal(size=(7, 5)) * 3
    t = rng.integers(0, 5, size=7)
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    expected = -np.mean(np.log(p[np.arange(7), t]))
    assert float(F.softmax_cross_entropy(x, t).data) == pytest.approx(expected, rel=1e-12)
    # shifting all logits by a large constant changes nothing (stable computation)
    assert float(F.softmax_cross_entropy(x + 1000.0, t).data) == pytest.approx(expected, rel=1e-9)


def test_accuracy_float32():
    y = np.array([[0.2, 0.8], [0.9, 0.1]], dtype=np.float32)
    acc = F.accuracy(y, np.array([1, 1]))
    assert acc.dtype == np.float32
    assert acc == pytest.approx(0.5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 7, 32, 1000, 12345])
def test_loss_mean_is_numpy_mean_bit_for_bit(dtype, size):
    from trainer_run.functions.loss import mean

    rng = np.random.default_rng(size)
    for scale in (1e-4, 1.0, 1e4):
        a = (rng.standard_normal(size) * scale).astype(dtype)
        for values in (a, a > 0):
            got, want = mean(values, dtype), values.mean(dtype=dtype)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("normalize", [True, False])
def test_sigmoid_cross_entropy(rng, normalize):
    x, t = rng.normal(size=(4, 3)) * 3, rng.integers(0, 2, size=(4, 3))
    p = 1 / (1 + np.exp(-x))
    total = -np.sum(t * np.log(p) + (1 - t) * np.log(1 - p))
    y = F.sigmoid_cross_entropy(x, t, normalize=normalize)
    np.testing.assert_allclose(y.data, total / (x.size if normalize else len(x)), rtol=1e-12)
    check_grads(lambda v, t: F.sigmoid_cross_entropy(v, t, normalize=normalize), [x, t], wrt={0})


def test_sigmoid_cross_entropy_is_stable_for_large_logits():
    x = np.array([[200.0, -200.0, 200.0]], dtype=np.float32)
    y = F.sigmoid_cross_entropy(x, np.array([[1, 0, 0]]))
    np.testing.assert_allclose(y.data, 200.0 / 3, rtol=1e-6)
    xv = Parameter(x)
    backward(F.sigmoid_cross_entropy(xv, np.array([[1, 0, 0]])))
    np.testing.assert_allclose(xv.grad, [[0, 0, 1 / 3]], atol=1e-7)


# -- a sequence's logits (batch, time, vocabulary) and ignore_index ----------------------------
def _hand_sequence_loss(x, t, ignore=None):
    """The mean over the kept positions of -log softmax(x[b, s])[t[b, s]], written out."""
    total, count = 0.0, 0
    for b in range(x.shape[0]):
        for s in range(x.shape[1]):
            if t[b, s] == ignore:
                continue
            row = x[b, s]
            total -= row[t[b, s]] - row.max() - np.log(np.exp(row - row.max()).sum())
            count += 1
    return total / max(count, 1)


def test_a_sequences_loss_is_the_mean_over_every_position(rng):
    x = rng.normal(size=(2, 5, 7)) * 2
    t = rng.integers(0, 7, size=(2, 5))
    loss = F.softmax_cross_entropy(x, t)
    assert float(loss.data) == pytest.approx(_hand_sequence_loss(x, t), rel=1e-12)
    flat = F.softmax_cross_entropy(x.reshape(10, 7), t.reshape(10))
    assert loss.data.tobytes() == flat.data.tobytes()
    check_grads(F.softmax_cross_entropy, [x, t], wrt={0})
    assert F.accuracy(x, t) == pytest.approx(np.mean(x.argmax(axis=2) == t))


@pytest.mark.parametrize("ignore", [-1, -100])  # nanoGPT's and PyTorch's default
def test_ignored_positions_count_nothing_in_the_loss_or_the_gradient(rng, ignore):
    x = rng.normal(size=(2, 6, 5)) * 2
    t = rng.integers(0, 5, size=(2, 6))
    t[0, 1] = t[1, 4] = t[1, 5] = ignore
    loss = F.softmax_cross_entropy(x, t, ignore_index=ignore)
    assert float(loss.data) == pytest.approx(_hand_sequence_loss(x, t, ignore), rel=1e-12)
    check_grads(lambda x, t: F.softmax_cross_entropy(x, t, ignore_index=ignore), [x, t], wrt={0})
    w = Parameter(x.copy())
    w.cleargrad()
    backward(F.softmax_cross_entropy(w, t, ignore_index=ignore))
    assert not w.grad[0, 1].any() and not w.grad[1, 4:].any() and w.grad[0, 0].any()


def test_all_positions_ignored_is_a_loss_of_zero_and_no_gradient(rng):
    x = rng.normal(size=(3, 4)).astype(np.float32)
    t = np.full(3, -1)
    w = Parameter(x.copy())
    w.cleargrad()
    loss = F.softmax_cross_entropy(w, t, ignore_index=-1)
    assert loss.data.dtype == np.float32 and float(loss.data) == 0.0
    backward(loss)
    assert not w.grad.any()


def test_accuracy_leaves_ignored_positions_out():
    y = np.zeros((1, 4, 3))
    y[0, np.arange(4), [0, 1, 2, 0]] = 1.0            # argmax per position: 0, 1, 2, 0
    t = np.array([[0, 2, -1, -1]])                    # right, wrong, ignored, ignored
    assert F.accuracy(y, t, ignore_index=-1) == pytest.approx(1 / 2)
    assert F.accuracy(y, t) == pytest.approx(1 / 4)
    assert F.accuracy(y, np.full((1, 4), -1), ignore_index=-1) == 0.0
