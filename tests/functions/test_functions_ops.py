"""Values (against NumPy float64 references) and finite-difference gradients of the arithmetic,
array, activation, loss and embedding functions, and of the Variable operators."""

import math

import numpy as np
import pytest
from gradients import check_grads

from trainer_run import functions as F
from trainer_run.autograd import Variable, backward
from trainer_run.params import Parameter


@pytest.fixture
def rng():
    return np.random.default_rng(4321)


BROADCAST_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((3, 4), ())]


# --- math -----------------------------------------------------------------------------------------


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


def test_reshape_and_flatten(rng):
    x = rng.normal(size=(2, 3, 4))
    np.testing.assert_array_equal(F.reshape(x, (4, -1)).data, x.reshape(4, 6))
    np.testing.assert_array_equal(F.flatten(x).data, x.reshape(2, 12))
    check_grads(lambda v: F.reshape(v, (6, 4)), [x], wrt={0})
    check_grads(F.flatten, [x], wrt={0})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_of_three(rng, axis):
    shapes = {0: [(1, 3), (2, 3), (4, 3)], 1: [(2, 1), (2, 3), (2, 2)], -1: [(2, 1), (2, 3), (2, 2)]}[axis]
    xs = [rng.normal(size=s) for s in shapes]
    np.testing.assert_array_equal(F.concat(xs, axis=axis).data, np.concatenate(xs, axis=axis))
    check_grads(lambda a, b, c: F.concat([a, b, c], axis=axis), xs, wrt={0, 1, 2})
    check_grads(lambda a, b, c: F.concat([a, b, c], axis=axis), xs, wrt={1})


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (0, -1, 1)])
def test_transpose(rng, axes):
    x = rng.normal(size=(2, 3, 4))
    np.testing.assert_array_equal(F.transpose(x, axes).data, np.transpose(x, axes))
    check_grads(lambda v: F.transpose(v, axes), [x], wrt={0})


# --- activation ----------------------------------------------------------------------------------


def _signed(rng, shape):
    return rng.uniform(0.1, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)


@pytest.mark.parametrize("slope", [0.2, 0.5])
def test_leaky_relu(rng, slope):
    x = _signed(rng, (3, 4))
    f = F.leaky_relu if slope == 0.2 else (lambda v: F.leaky_relu(v, slope))
    np.testing.assert_array_equal(f(x).data, np.where(x >= 0, x, slope * x))
    check_grads(f, [x], wrt={0})
    assert F.ACTIVATIONS["leaky_relu"] is F.leaky_relu and F.ACTIVATIONS["gelu"] is F.gelu


def test_gelu(rng):
    x = rng.normal(size=(3, 5)) * 2
    c = math.sqrt(2 / math.pi)
    np.testing.assert_allclose(F.gelu(x).data, 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3))), rtol=1e-14)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)
    np.testing.assert_allclose(F.gelu(x).data, exact, atol=1e-3)  # the tanh form approximates the erf form
    check_grads(F.gelu, [x], wrt={0})


def _ref_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [1, 0, -1])
def test_softmax_and_log_softmax(rng, axis):
    x = rng.normal(size=(3, 4, 2)) * 3
    ref = _ref_log_softmax(x, axis)
    np.testing.assert_allclose(F.log_softmax(x, axis=axis).data, ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(F.softmax(x, axis=axis).data, np.exp(ref), rtol=1e-13)
    np.testing.assert_allclose(F.softmax(x, axis=axis).data.sum(axis=axis), 1.0)
    check_grads(lambda v: F.softmax(v, axis=axis), [x], wrt={0})
    check_grads(lambda v: F.log_softmax(v, axis=axis), [x], wrt={0})


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 0.0, -1000.0]], dtype=np.float32)
    np.testing.assert_allclose(F.softmax(x).data, [[1, 0, 0]])
    np.testing.assert_allclose(F.log_softmax(x).data, [[0, -1000, -2000]])
    assert F.softmax(x).dtype == np.float32


# --- loss and embedding --------------------------------------------------------------------------


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


@pytest.mark.parametrize("ids_shape", [(5,), (2, 3)])
def test_embed_id(rng, ids_shape):
    W = rng.normal(size=(4, 3))
    ids = rng.integers(0, 4, size=ids_shape)
    ids.flat[:2] = 1  # a repeated id: its gradient rows sum
    np.testing.assert_array_equal(F.embed_id(ids, W).data, W[ids])
    assert F.embed_id(ids, W).shape == ids_shape + (3,)
    check_grads(F.embed_id, [ids, W], wrt={1})
    Wp = Parameter(W.copy())
    gy = rng.normal(size=ids_shape + (3,))
    backward(F.embed_id(ids, Wp), gy=gy)
    expected = np.zeros_like(W)
    for i, row in zip(ids.ravel(), gy.reshape(-1, 3)):
        expected[i] += row
    np.testing.assert_allclose(Wp.grad, expected)


def test_embed_id_of_a_computed_table_and_of_a_shared_parameter(rng):
    W, ids = rng.normal(size=(4, 3)), np.array([[0, 3], [3, 1]])
    check_grads(lambda w: F.embed_id(ids, F.scale(w, 2.0)), [W], wrt={0})
    check_grads(lambda w: F.add(F.embed_id(ids, w), F.embed_id(ids[::-1], w)), [W], wrt={0})


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
