"""Layers (trainer_run.layers): forward against the functions and hand computations, their
paths in the model tree, modes, persistent statistics, and gradients against finite
differences (trainer_run.check_gradients); multi-head self-attention against nanoGPT's computation
in NumPy, and on CuPy against NumPy."""

import numpy as np
import pytest
from gpu_helpers import backend, host

import trainer_run
from trainer_run import functions as F
from trainer_run.autograd import backward
from trainer_run.backend import get_backend
from trainer_run.errors import ConfigError
from trainer_run.layers import (
    BatchNorm,
    Conv2D,
    Dropout,
    Embedding,
    KVCache,
    LayerNorm,
    MultiHeadSelfAttention,
    Sequential,
)
from trainer_run.models import Linear, Module


def _backend(seed=0, dtype="float64"):
    return get_backend("numpy", seed=seed, dtype=dtype)


class Classifier(Module):
    """``body`` then mean softmax cross entropy: a model to check a layer's gradients."""

    def __init__(self, body):
        self.body = body

    def __call__(self, x, t):
        y = self.body(x)
        return F.softmax_cross_entropy(F.flatten(y), t)


def test_conv2d_same_padding_keeps_the_size_and_equals_the_function():
    b = _backend()
    conv = Conv2D(3, 4, 5, b, pad="same", dtype="float64")
    x = np.random.default_rng(0).normal(size=(2, 3, 7, 6))
    y = conv(x).data
    assert y.shape == (2, 4, 7, 6)
    np.testing.assert_array_equal(y, F.convolution_2d(x, conv.W, conv.b, pad=2).data)
    assert conv.W.data.std() == pytest.approx(1 / np.sqrt(3 * 25), rel=0.2)  # LeCun normal
    assert set(Classifier(conv).params()) == {"body/W", "body/b"}


def test_batch_norm_uses_batch_statistics_in_training_and_running_ones_in_evaluation():
    bn = BatchNorm(3, _backend(), decay=0.5, dtype="float64")
    x = np.random.default_rng(1).normal(2.0, 3.0, size=(8, 3, 2, 2))
    y = bn(x).data
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(y, (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 2e-5), atol=1e-12)
    m = 8 * 2 * 2
    np.testing.assert_allclose(bn.avg_mean.data, 0.5 * 0 + 0.5 * mean)
    np.testing.assert_allclose(bn.avg_var.data, 0.5 * 1 + 0.5 * var * m / (m - 1))
    bn.eval()
    np.testing.assert_allclose(bn(x).data, (x - bn.avg_mean.data[:, None, None])
                               / np.sqrt(bn.avg_var.data[:, None, None] + 2e-5), atol=1e-12)
    assert set(Classifier(bn).persistents()) == {"body/avg_mean", "body/avg_var"}


def test_layer_norm_embedding_and_dropout_values():
    b = _backend()
    x = np.random.default_rng(2).normal(size=(4, 5))
    ln = LayerNorm(5, b, dtype="float64")
    np.testing.assert_allclose(ln(x).data, (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True)
                                                                                     + 1e-5), atol=1e-12)
    emb = Embedding(6, 3, b, dtype="float64")
    ids = np.array([[0, 5], [5, 2]])
    np.testing.assert_array_equal(emb(ids).data, emb.W.data[ids])
    drop = Dropout(0.5, b)
    kept = drop(np.ones((200, 50))).data
    assert set(np.unique(kept).tolist()) == {0.0, 2.0} and abs((kept == 0).mean() - 0.5) < 0.02
    drop.eval()
    assert drop(x) is x


def test_sequential_applies_its_steps_in_order_with_paths_by_position():
    b = _backend()
    seq = Sequential(Linear(3, 4, b, "float64"), F.relu, Linear(4, 2, b, "float64"))
    assert list(seq.params()) == ["0/W", "0/b", "2/W", "2/b"]
    x = np.random.default_rng(3).normal(size=(5, 3))
    manual = F.linear(F.relu(F.linear(x, seq._steps[0].W, seq._steps[0].b)), seq._steps[2].W, seq._steps[2].b)
    np.testing.assert_array_equal(seq(x).data, manual.data)
    seq.eval()
    assert not seq._steps[0].training


@pytest.mark.parametrize("make, shape", [
    (lambda b: Sequential(Conv2D(2, 3, 3, b, stride=2, pad=1, dtype="float64"), F.relu), (4, 2, 5, 5)),
    (lambda b: Sequential(Conv2D(2, 2, 3, b, pad="same", dtype="float64"), BatchNorm(2, b, dtype="float64"),
                          F.relu, lambda h: F.max_pooling_2d(h, 2)), (4, 2, 4, 4)),
    (lambda b: Sequential(LayerNorm(6, b, dtype="float64"), Linear(6, 3, b, "float64")), (5, 6)),
])
def test_layer_gradients_match_finite_differences(make, shape):
    b = _backend()
    model = Classifier(make(b))
    x = np.random.default_rng(4).normal(size=shape)
    n_out = F.flatten(model.body(x)).shape[1]
    t = np.arange(shape[0]) % n_out
    errors = trainer_run.check_gradients(model, (x, t), samples=6)
    assert max(errors.values()) <= 1


def test_embedding_gradients_match_finite_differences():
    b = _backend()

    class Bag(Module):
        def __init__(self):
            self.emb = Embedding(5, 3, b, dtype="float64")

        def __call__(self, ids, t):
            return F.softmax_cross_entropy(F.mean(self.emb(ids), axis=1), t)

    ids = np.array([[0, 1, 1], [4, 2, 0]])
    assert max(trainer_run.check_gradients(Bag(), (ids, np.array([0, 2]))).values()) <= 1


def _attention_by_hand(layer, x, causal=True):
    """nanoGPT's CausalSelfAttention in NumPy from the layer's weights: q, k, v from one product,
    heads of n_embd // n_head, a masked softmax, the heads joined and projected."""
    b_, t, c = x.shape
    nh = layer.n_head
    bias = lambda p: 0 if p is None else p.data  # noqa: E731
    qkv = x @ layer.c_attn.W.data.T + bias(layer.c_attn.b)
    q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(b_, t, nh, c // nh).transpose(0, 2, 1, 3)
               for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(c // nh)
    if causal:
        scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    y = (weights @ v).transpose(0, 2, 1, 3).reshape(b_, t, c)
    return y @ layer.c_proj.W.data.T + bias(layer.c_proj.b)


def _attention_layer(seed=0, **kwargs):
    layer = MultiHeadSelfAttention(8, 2, _backend(seed), dtype="float64", **kwargs)
    rng = np.random.default_rng(seed + 10)
    for p in layer.params().values():
        if p.name.endswith("/b"):
            p.data[...] = rng.normal(size=p.data.shape)  # biases that count in the check
    return layer


@pytest.mark.parametrize("causal", [True, False])
def test_multi_head_self_attention_equals_a_hand_computation(causal):
    layer = _attention_layer(causal=causal)
    assert list(Classifier(layer).params()) == ["body/c_attn/W", "body/c_attn/b", "body/c_proj/W",
                                                "body/c_proj/b"]
    assert layer.c_attn.W.shape == (24, 8)
    x = np.random.default_rng(5).normal(size=(2, 5, 8))
    np.testing.assert_allclose(layer(x).data, _attention_by_hand(layer, x, causal), rtol=1e-10, atol=1e-12)
    plain = _attention_layer(bias=False)
    assert list(plain.params()) == ["c_attn/W", "c_proj/W"]
    np.testing.assert_allclose(plain(x).data, _attention_by_hand(plain, x), rtol=1e-10, atol=1e-12)


def test_multi_head_self_attention_drops_its_output_in_training_only():
    layer = _attention_layer(dropout=0.5)
    x = np.random.default_rng(6).normal(size=(2, 5, 8))
    expected = _attention_by_hand(layer, x)
    kept = layer(x).data / expected
    assert set(np.round(kept, 9).ravel().tolist()) == {0.0, 2.0}
    layer.eval()
    np.testing.assert_allclose(layer(x).data, expected, rtol=1e-10, atol=1e-12)


class Weighted(Module):
    """``sum(c * body(x))``: a model to check a layer's gradients for an output of any shape."""

    def __init__(self, body):
        self.body = body

    def __call__(self, x, c):
        return F.sum(F.mul(self.body(x), c))


@pytest.mark.parametrize("causal", [True, False])
def test_multi_head_self_attention_gradients_match_finite_differences(causal):
    rng = np.random.default_rng(7)
    x, c = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    errors = trainer_run.check_gradients(Weighted(_attention_layer(causal=causal)), (x, c), samples=12)
    assert set(errors) == {"body/c_attn/W", "body/c_attn/b", "body/c_proj/W", "body/c_proj/b"}
    assert max(errors.values()) <= 1


def test_multi_head_self_attention_keeps_one_scores_sized_array_for_the_backward():
    layer = _attention_layer()
    y = layer(np.random.default_rng(9).normal(size=(2, 5, 8)))
    kept, seen, todo = [], set(), [y.creator]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        kept += [f"{type(fn).__name__}.{name}" for name, value in vars(fn).items()
                 if isinstance(value, np.ndarray) and value.shape == (2, 2, 5, 5)]
        todo += [getattr(x, "creator", None) for x in fn.inputs]
    assert kept == ["ScaledDotProductAttention._p"]


def test_multi_head_self_attention_refuses_heads_that_do_not_divide_the_width():
    with pytest.raises(ConfigError) as refused:
        MultiHeadSelfAttention(10, 4, _backend())
    assert str(refused.value) == "n_embd=10 is not divisible by n_head=4; choose n_head that divides n_embd"


def _attention_forward_backward(device):
    layer = MultiHeadSelfAttention(8, 2, backend(device, seed=3))
    rng = np.random.default_rng(8)
    x, c = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    b = backend(device)
    y = layer(b.asarray(x.astype(np.float32)))
    backward(F.sum(F.mul(y, b.asarray(c.astype(np.float32)))))
    return [host(y.data)] + [host(p.grad) for p in layer.params().values()]


@pytest.mark.gpu
def test_multi_head_self_attention_on_cupy_equals_numpy():
    for got, expected in zip(_attention_forward_backward("cupy"), _attention_forward_backward("numpy")):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=3e-6)


def test_attention_fed_in_pieces_through_a_cache_equals_one_full_pass():
    layer = _attention_layer()
    x = np.random.default_rng(4).normal(size=(2, 8, 8))
    full = layer(x).data
    cache = KVCache()
    pieces = [layer(x[:, a:b], cache).data for a, b in ((0, 3), (3, 4), (4, 5), (5, 8))]
    assert len(cache) == 8 and cache.k.shape == cache.v.shape == (2, 2, 8, 4)
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(full, _attention_by_hand(layer, x, True), rtol=1e-10, atol=1e-12)
