"""Values (against NumPy float64 references) and finite-difference gradients of the arithmetic,
array, activation, loss and embedding functions, and of the Variable operators."""


import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import Variable, backward
from trainer_run.params import Parameter


@pytest.fixture
def rng():
    return np.random.default_rng(4321)


# --- math -----------------------------------------------------------------------------------------


def test_float32_stays_float32(rng):
    x32 = rng.normal(size=(2, 3)).astype(np.float32)
    w32 = rng.normal(size=(3, 3)).astype(np.float32)
    outputs = [F.mul(x32, x32), F.sub(x32, 1.0), F.div(x32, 2.0), F.exp(x32), F.log(abs(x32) + 1),
               F.sum(x32), F.mean(x32, axis=0), F.matmul(x32, w32), F.reshape(x32, (3, 2)), F.flatten(x32),
               F.concat([x32, x32]), F.transpose(x32), F.leaky_relu(x32), F.gelu(x32), F.softmax(x32),
               F.log_softmax(x32), F.sigmoid_cross_entropy(x32, (x32 > 0).astype(np.int32)),
               F.embed_id(np.array([0, 2]), w32)]
    for y in outputs:
        assert y.dtype == np.float32


# --- operators -----------------------------------------------------------------------------------


def _grads(f, arrays):
    params = [Parameter(a.copy()) for a in arrays]
    y = f(*params)
    backward(y)
    return y.data, [p.grad for p in params]


def _assert_same(f_ops, f_fns, arrays):
    (y0, g0), (y1, g1) = _grads(f_ops, arrays), _grads(f_fns, arrays)
    np.testing.assert_allclose(y0, y1, rtol=1e-14)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_operator_loss_matches_function_form(rng):
    y, W = rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    t = rng.normal(size=(4, 3))

    def with_ops(y, W):
        h = y @ W
        d = h - t
        return F.mean(d * d) + F.mean(1 - h) - F.mean(-h / 2) + F.mean(2 / (h * h + 1))

    def with_functions(y, W):
        h = F.matmul(y, W)
        d = F.sub(h, t)
        terms = [F.mean(F.mul(d, d)), F.mean(F.sub(1.0, h)), F.scale(F.mean(F.scale(h, -0.5)), -1),
                 F.mean(F.div(2.0, F.add(F.mul(h, h), 1.0)))]
        return F.add(F.add(terms[0], terms[1]), F.add(terms[2], terms[3]))

    _assert_same(with_ops, with_functions, [y, W])
    value, _ = _grads(with_ops, [y, W])
    h = y @ W
    expected = np.mean((h - t) ** 2) + np.mean(1 - h) + np.mean(h / 2) + np.mean(2 / (h * h + 1))
    np.testing.assert_allclose(value, expected, rtol=1e-14)
    check_grads(with_ops, [y, W], wrt={0, 1})


def test_operators_with_arrays_on_the_left(rng):
    x, c, W = rng.normal(size=(2, 3)), rng.uniform(1, 2, size=(2, 3)), rng.normal(size=(4, 2))
    _assert_same(lambda v: F.sum(c * v + c - v + c / v), lambda v: F.sum(F.add(F.add(F.mul(c, v), c),
                 F.sub(F.div(c, v), v))), [x])
    v = Parameter(x)
    for y, ref in [(c * v, c * x), (c + v, c + x), (c - v, c - x), (c / v, c / x), (W @ v, W @ x),
                   (np.float32(2) * v, 2 * x)]:
        assert isinstance(y, Variable)
        np.testing.assert_allclose(y.data, ref)
    check_grads(lambda v: W @ v, [x], wrt={0})
    check_grads(lambda v: c / v - (1 - v) * 3, [c], wrt={0})


def test_scalar_operators_keep_float32(rng):
    x = Parameter(rng.normal(size=(2, 2)).astype(np.float32))
    for y in [x * 2, 2 * x, x / 4, 1 - x, x - 1, 2 / x, -x, x + 1.5, 1.5 + x]:
        assert y.dtype == np.float32
    np.testing.assert_allclose((-x).data, -x.data)
    np.testing.assert_allclose((1 - x).data, 1 - x.data)


# --- array ---------------------------------------------------------------------------------------


# --- activation ----------------------------------------------------------------------------------


# --- loss and embedding --------------------------------------------------------------------------


def test_square_by_operator_sums_both_paths(rng):
    x = rng.normal(size=(2, 3))
    v = Parameter(x.copy())
    backward(F.sum(v * v))
    np.testing.assert_allclose(v.grad, 2 * x)



GPU_CASES = {
    "mul_div_exp_log": lambda a, b: F.sum(F.mul(a, b) + F.div(a, F.exp(b)) + F.log(F.exp(a))),
    "reductions": lambda a, b: F.sum(F.mean(a, axis=0, keepdims=True) * F.sum(b, axis=1, keepdims=True)),
    "matmul": lambda a, b: F.sum(a @ F.transpose(b)),
    "array": lambda a, b: F.sum(F.concat([F.flatten(a), F.reshape(b, (3, 4)), a], axis=1) * 0.5),
    "activations": lambda a, b: F.sum(F.gelu(a) * F.leaky_relu(b) + F.log_softmax(a) * F.softmax(b)),
    "sigmoid_ce": lambda a, b: F.sigmoid_cross_entropy(a, (b.data > 0).astype("int32")) + F.sum(b),
    "embed_id": lambda a, b: F.sum(F.embed_id(a.data.argsort(axis=0), b) * F.reshape(a, (3, 4, 1))),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_cupy_matches_numpy(rng, case, cupy):
    a, b = (rng.normal(size=(3, 4)) * 2).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    results = []
    for xp in (np, cupy):
        params = [Parameter(xp.asarray(a)), Parameter(xp.asarray(b))]
        y = GPU_CASES[case](*params)
        backward(y)
        results.append([cupy.asnumpy(v) for v in (y.data, params[0].grad, params[1].grad) if v is not None])
    for host, device in zip(*results, strict=True):
        assert device.dtype == np.float32
        np.testing.assert_allclose(device, host, rtol=1e-5, atol=1e-6)
