"""The arithmetic functions (functions/math.py): values against NumPy float64 references and gradients
against finite differences, broadcasting included."""

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import backward
from trainer_run.params import Parameter


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


BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((3, 4), ())]


@pytest.mark.parametrize("name, ref", [("mul", np.multiply), ("sub", np.subtract), ("div", np.divide)])
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_binary_value_and_grad_with_broadcasting(rng, name, ref, shapes):
    a = np.asarray(rng.normal(size=shapes[0]))
    b = np.asarray(rng.uniform(0.5, 2.0, size=shapes[1]) * rng.choice([-1.0, 1.0], size=shapes[1]))
    f = getattr(F, name)
    np.testing.assert_allclose(f(a, b).data, ref(a, b), rtol=1e-15)
    check_grads(f, [a, b], wrt={0, 1})
    check_grads(f, [b, a], wrt={0, 1})
    check_grads(f, [a, b], wrt={1})


def test_binary_closed_form_gradients(rng):
    a, b = Parameter(rng.normal(size=(2, 3))), Parameter(rng.uniform(1, 2, size=3))
    backward(F.div(a, b), gy=np.ones((2, 3)))
    np.testing.assert_allclose(a.grad, np.broadcast_to(1 / b.data, (2, 3)))
    np.testing.assert_allclose(b.grad, -(a.data / b.data**2).sum(axis=0))


@pytest.mark.parametrize("name", ["exp", "log"])
def test_exp_log(rng, name):
    x = rng.uniform(0.2, 3.0, size=(3, 4))
    np.testing.assert_allclose(getattr(F, name)(x).data, getattr(np, name)(x), rtol=1e-15)
    check_grads(getattr(F, name), [x], wrt={0})


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (2, 0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(rng, name, axis, keepdims):
    x = rng.normal(size=(2, 3, 4))
    f = getattr(F, name)
    y = f(x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(y.data, getattr(np, name)(x, axis=axis, keepdims=keepdims), rtol=1e-13)
    assert y.data.shape == np.shape(getattr(np, name)(x, axis=axis, keepdims=keepdims))
    check_grads(lambda v: f(v, axis=axis, keepdims=keepdims), [x], wrt={0})


def test_mean_gradient_is_one_over_count(rng):
    x = Parameter(rng.normal(size=(2, 5)))
    backward(F.mean(x, axis=1), gy=np.array([1.0, 2.0]))
    np.testing.assert_allclose(x.grad, np.repeat([[0.2], [0.4]], 5, axis=1))


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
                                    ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2))])
def test_matmul(rng, shapes):
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    np.testing.assert_allclose(F.matmul(a, b).data, np.matmul(a, b), rtol=1e-13)
    check_grads(F.matmul, [a, b], wrt={0, 1})


def test_matmul_rejects_vectors(rng):
    with pytest.raises(ValueError, match="2 or more dimensions"):
        F.matmul(rng.normal(size=3), rng.normal(size=(3, 2)))
