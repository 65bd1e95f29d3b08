"""Finite-difference gradient checks and value checks for trainer_run.functions."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import backward, no_grad
from trainer_run.params import Parameter


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_linear_grad_with_bias(rng):
    x, W, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    check_grads(F.linear, [x, W, b], wrt={0, 1, 2})


def test_linear_grad_without_bias(rng):
    x, W = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    check_grads(F.linear, [x, W], wrt={0, 1})


def test_linear_value_matches_chainer_convention(rng):
    x, W, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=5)
    np.testing.assert_allclose(F.linear(x, W, b).data, x @ W.T + b)
    np.testing.assert_allclose(F.linear(x, W).data, x @ W.T)


def test_relu_grad(rng):
    x = rng.uniform(0.1, 2.0, size=(4, 5)) * rng.choice([-1.0, 1.0], size=(4, 5))
    check_grads(F.relu, [x], wrt={0})
    np.testing.assert_array_equal(F.relu(x).data, np.where(x > 0, x, 0.0))


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_smooth_activation_grad(rng, name):
    x = rng.normal(size=(4, 5)) * 2
    check_grads(getattr(F, name), [x], wrt={0})


def test_activation_values(rng):
    x = rng.normal(size=(3, 4)) * 3
    np.testing.assert_allclose(F.tanh(x).data, np.tanh(x))
    np.testing.assert_allclose(F.sigmoid(x).data, 1 / (1 + np.exp(-x)), rtol=1e-12)


def test_softmax_cross_entropy_grad(rng):
    x = rng.normal(size=(6, 4)) * 2
    t = rng.integers(0, 4, size=6)
    check_grads(F.softmax_cross_entropy, [x, t], wrt={0})


def test_mean_squared_error_grad(rng):
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    check_grads(F.mean_squared_error, [a, b], wrt={0, 1})
    np.testing.assert_allclose(F.mean_squared_error(a, b).data, np.mean((a - b) ** 2))


def test_add_grad(rng):
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    check_grads(F.add, [a, b], wrt={0, 1})
    check_grads(F.add, [a, b], wrt={1})
    np.testing.assert_allclose(F.add(a, b).data, a + b)


@pytest.mark.parametrize("shape", [(3,), (1, 3), (4, 1), ()])
def test_add_broadcast_grad_sums_to_the_input_shape(rng, shape):
    a, b = rng.normal(size=(4, 3)), np.asarray(rng.normal(size=shape))
    check_grads(F.add, [a, b], wrt={0, 1})


@pytest.mark.parametrize("factor", [2.5, -0.75, 3])
def test_scale_grad(rng, factor):
    x = rng.normal(size=(3, 4))
    check_grads(lambda v: F.scale(v, factor), [x], wrt={0})
    np.testing.assert_allclose(F.scale(x, factor).data, x * factor)


def test_composition_grad(rng):
    """A small MLP loss: gradients flow through several functions to every parameter."""
    x = rng.normal(size=(5, 3))
    t = rng.integers(0, 2, size=5)

    def loss(W1, b1, W2):
        return F.softmax_cross_entropy(F.linear(F.tanh(F.linear(x, W1, b1)), W2), t)

    check_grads(loss, [rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=(2, 4))],
                wrt={0, 1, 2})


def test_accuracy_by_hand():
    y = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    t = np.array([1, 1, 1, 0])
    # argmax rows: 1, 0, 1, 0 -> rows 0, 2, 3 are right
    assert F.accuracy(y, t) == pytest.approx(3 / 4)
    assert F.accuracy(Parameter(y), t) == pytest.approx(3 / 4)


def test_parameter_used_twice_gets_sum_of_contributions(rng):
    x = rng.normal(size=(4, 3))
    W = rng.normal(size=(3, 3))
    check_grads(lambda W_: F.linear(F.linear(x, W_), W_), [W], wrt={0})


def test_parameter_used_twice_sum_differs_from_each_part(rng):
    """The reused parameter's gradient is the outer plus the inner contribution."""
    x = rng.normal(size=(4, 3))
    W = rng.normal(size=(3, 3))
    c = rng.normal(size=(4, 3))
    p = Parameter(W.copy())
    backward(F.linear(F.linear(x, p), p), gy=c)
    h = x @ W.T
    outer = c.T @ h  # W in the outer layer, inner output held fixed
    inner = (c @ W).T @ x  # W in the inner layer, outer W held fixed
    np.testing.assert_allclose(p.grad, outer + inner, rtol=1e-12)


def test_intermediate_variable_used_twice(rng):
    x = rng.normal(size=(3, 4))

    def f(x_):
        h = F.tanh(x_)
        return F.add(h, F.scale(F.sigmoid(h), 2.0))

    check_grads(f, [x], wrt={0})


def test_second_backward_after_cleargrad_overwrites(rng):
    """cleargrad marks the gradient stale: the next backward overwrites, not adds."""
    x = rng.normal(size=(4, 3))
    W = rng.normal(size=(3, 3))
    c = rng.normal(size=(4, 3))
    p = Parameter(W.copy())
    backward(F.linear(F.linear(x, p), p), gy=c)
    first = p.grad.copy()
    p.cleargrad()
    backward(F.linear(F.linear(x, p), p), gy=c)
    np.testing.assert_allclose(p.grad, first, rtol=1e-12)
    backward(F.linear(F.linear(x, p), p), gy=c)  # no cleargrad: accumulates
    np.testing.assert_allclose(p.grad, 2 * first, rtol=1e-12)


def test_no_grad_records_no_creator(rng):
    W = Parameter(rng.normal(size=(2, 3)))
    x = rng.normal(size=(4, 3))
    with no_grad():
        y = F.relu(F.linear(x, W))
    assert y.creator is None
    backward(y)  # nothing to walk
    assert W.grad is None
    assert F.linear(x, W).creator is not None  # recording is back on after the block


def test_no_graph_without_parameters(rng):
    y = F.tanh(rng.normal(size=(2, 2)))
    assert y.creator is None


def test_softmax_cross_entropy_value(rng):
    x = rng.normal(size=(7, 5)) * 3
    t = rng.integers(0, 5, size=7)
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    expected = -np.mean(np.log(p[np.arange(7), t]))
    assert float(F.softmax_cross_entropy(x, t).data) == pytest.approx(expected, rel=1e-12)
    # shifting all logits by a large constant changes nothing (stable computation)
    assert float(F.softmax_cross_entropy(x + 1000.0, t).data) == pytest.approx(expected, rel=1e-9)


def _float32_cases(rng):
    f32 = np.float32
    x = rng.normal(size=(4, 3)).astype(f32)
    W = rng.normal(size=(2, 3)).astype(f32)
    b = rng.normal(size=2).astype(f32)
    other = rng.normal(size=(4, 3)).astype(f32)
    t = rng.integers(0, 3, size=4).astype(np.int32)
    return {
        "linear": (F.linear, [x, W, b], {0, 1, 2}),
        "linear_nobias": (F.linear, [x, W], {0, 1}),
        "relu": (F.relu, [x], {0}),
        "tanh": (F.tanh, [x], {0}),
        "sigmoid": (F.sigmoid, [x], {0}),
        "softmax_cross_entropy": (F.softmax_cross_entropy, [x, t], {0}),
        "mean_squared_error": (F.mean_squared_error, [x, other], {0, 1}),
        "add": (F.add, [x, other], {0, 1}),
        "scale": (lambda v: F.scale(v, 0.5), [x], {0}),
    }


@pytest.mark.parametrize("name", list(_float32_cases(np.random.default_rng(0))))
def test_float32_in_float32_out(name):
    f, arrays, wrt = _float32_cases(np.random.default_rng(0))[name]
    assert f(*arrays).dtype == np.float32
    inputs = [Parameter(a) if k in wrt else a for k, a in enumerate(arrays)]
    y = f(*inputs)
    assert y.dtype == np.float32
    backward(y)
    for k in wrt:
        assert inputs[k].grad.dtype == np.float32


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
