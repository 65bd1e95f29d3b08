"""The graph and backward pass (trainer_run.autograd): a parameter or an intermediate used twice gets
the sum of its contributions, a second backward after cleargrad overwrites, and nothing is recorded
under no_grad or without parameters."""

import numpy as np
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import backward, no_grad
from trainer_run.params import Parameter


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
