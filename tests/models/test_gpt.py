"""The GPT model (trainer_run.models.GPT, nanoGPT's model.py): its logits against a NumPy
forward written here from its own parameter arrays, causality, gradients against finite
differences (the tied embedding's gradient the sum of its two uses), nanoGPT's initial values
from the seed, and its refusals' lines."""

import numpy as np
import pytest

from trainer_run import check_gradients
from trainer_run.autograd import backward
from trainer_run.backend import get_backend
from trainer_run.errors import ConfigError
from trainer_run.models import GPT

V, BLOCK, C, HEADS, LAYERS = 11, 8, 16, 2, 2


def _model(seed=0, spread=True, **kwargs):
    """A tiny float64 GPT; ``spread`` redraws every parameter at std 0.3 (biases, LayerNorm
    shifts and scales too) so that each counts in the logits and gradients."""
    options = dict(block_size=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=C, dtype="float64")
    model = GPT(V, get_backend("numpy", seed=seed, dtype="float64"), **{**options, **kwargs})
    if spread:
        rng = np.random.default_rng(seed + 100)
        for path, p in model.params().items():
            p.data[...] = rng.normal(size=p.data.shape) * 0.3 + (path.endswith("gamma"))
    return model


def _ids(shape=(2, BLOCK), seed=1):
    return np.random.default_rng(seed).integers(0, V, size=shape)


def _layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gpt_by_hand(model, ids):
    """nanoGPT's forward in NumPy, from the model's parameter arrays by path."""
    p = {path: q.data for path, q in model.params().items()}
    b, t = ids.shape
    x = p["wte/W"][ids] + p["wpe/W"][:t]
    d = C // HEADS
    mask = np.tril(np.ones((t, t), dtype=bool))
    for k in range(LAYERS):
        w = {name[len(f"h/{k}/"):]: a for name, a in p.items() if name.startswith(f"h/{k}/")}
        y = _layer_norm(x, w["ln_1/gamma"], w["ln_1/beta"])
        qkv = y @ w["attn/c_attn/W"].T + w.get("attn/c_attn/b", 0)
        q, kk, v = (qkv[..., i * C:(i + 1) * C].reshape(b, t, HEADS, d).transpose(0, 2, 1, 3)
                    for i in range(3))
        scores = np.where(mask, q @ kk.transpose(0, 1, 3, 2) / np.sqrt(d), -np.inf)
        att = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, t, C)
        x = x + att @ w["attn/c_proj/W"].T + w.get("attn/c_proj/b", 0)
        y = _layer_norm(x, w["ln_2/gamma"], w["ln_2/beta"])
        hidden = _gelu(y @ w["mlp/c_fc/W"].T + w.get("mlp/c_fc/b", 0))
        x = x + hidden @ w["mlp/c_proj/W"].T + w.get("mlp/c_proj/b", 0)
    x = _layer_norm(x, p["ln_f/gamma"], p["ln_f/beta"])
    return x @ p.get("lm_head/W", p["wte/W"]).T


@pytest.mark.parametrize("options", [{}, {"tie_weights": False}, {"bias": False}])
def test_the_logits_equal_nanogpts_forward_by_hand(options):
    model = _model(**options)
    for ids in (_ids(), _ids((3, 5), seed=2)):
        logits = model.forward(ids).data
        assert logits.shape == ids.shape + (V,)
        np.testing.assert_allclose(logits, gpt_by_hand(model, ids), rtol=1e-6, atol=1e-6)
    paths = list(model.params())
    assert ("lm_head/W" in paths) == (options.get("tie_weights") is False)
    assert any(path.endswith("/b") for path in paths) == (options.get("bias") is not False)


def test_the_loss_and_accuracy_are_the_mean_over_the_positions_not_ignored():
    model, ids = _model(), _ids()
    targets = _ids(seed=3)
    targets[0, :3] = -1
    out = model(ids, targets)
    logits = gpt_by_hand(model, ids)
    keep = targets != -1
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_p, np.where(keep, targets, 0)[..., None], -1)[..., 0][keep].mean()
    assert float(out["loss"].data) == pytest.approx(expected, rel=1e-9)
    assert float(out["accuracy"]) == pytest.approx((logits.argmax(-1) == targets)[keep].mean())


def test_a_position_sees_only_the_tokens_before_it():
    model, ids = _model(), _ids()
    before = model.forward(ids).data
    for t in range(BLOCK - 1):
        changed = ids.copy()
        changed[:, t + 1:] = (changed[:, t + 1:] + 1 + t) % V
        after = model.forward(changed).data
        np.testing.assert_array_equal(after[:, :t + 1], before[:, :t + 1])
        assert not np.array_equal(after[:, t + 1:], before[:, t + 1:])


@pytest.mark.parametrize("tie_weights", [True, False])
def test_gradients_match_finite_differences(tie_weights):
    model = _model(tie_weights=tie_weights)
    targets = _ids(seed=3)
    targets[1, -2:] = -1
    ratios = check_gradients(model, (_ids(), targets), samples=6)
    assert set(ratios) == set(model.params()) and max(ratios.values()) <= 1


def _gradients(model, ids, targets):
    for p in model.params().values():
        p.cleargrad()
    backward(model(ids, targets)["loss"])
    return {path: p.grad.copy() for path, p in model.params().items()}


def test_the_tied_embeddings_gradient_is_the_sum_of_both_uses():
    tied, untied = _model(), _model(tie_weights=False)
    for path, p in tied.params().items():
        untied.params()[path].data[...] = p.data
    untied.lm_head.W.data[...] = tied.wte.W.data
    ids, targets = _ids(), _ids(seed=3)
    np.testing.assert_allclose(untied.forward(ids).data, tied.forward(ids).data, rtol=0, atol=0)
    g_tied, g_untied = _gradients(tied, ids, targets), _gradients(untied, ids, targets)
    assert list(tied.params()).count("wte/W") == 1 and "lm_head/W" not in g_tied
    assert not np.allclose(g_untied["wte/W"], g_untied["lm_head/W"])
    np.testing.assert_allclose(g_tied["wte/W"], g_untied["wte/W"] + g_untied["lm_head/W"],
                               rtol=1e-12, atol=1e-12)


def test_nanogpts_initial_values_drawn_from_the_seed():
    model = _model(spread=False, n_embd=64, tie_weights=False)
    params = model.params()
    assert [path for path, p in params.items() if p is model.wte.W] == ["wte/W"]
    residual = 0.02 / np.sqrt(2 * LAYERS)
    for path, p in params.items():
        if path.endswith("c_proj/W"):
            assert p.data.std() == pytest.approx(residual, rel=0.1), path
        elif path.endswith("/W"):
            assert p.data.std() == pytest.approx(0.02, rel=0.1), path
        elif path.endswith("gamma"):
            np.testing.assert_array_equal(p.data, 1)
        else:
            np.testing.assert_array_equal(p.data, 0)
        if path.endswith("/W"):
            assert abs(p.data.mean()) < 0.2 * p.data.std(), path
    again, other = _model(spread=False, n_embd=64, tie_weights=False), _model(1, spread=False, n_embd=64,
                                                                             tie_weights=False)
    for path, p in params.items():
        np.testing.assert_array_equal(again.params()[path].data, p.data)
    assert not np.array_equal(other.wte.W.data, model.wte.W.data)
    assert list(_model(spread=False).params()).count("wte/W") == 1


def test_more_tokens_than_the_block_size_are_refused_in_one_line():
    model = _model()
    with pytest.raises(ConfigError) as refused:
        model.forward(_ids((1, BLOCK + 1)))
    assert str(refused.value) == (f"a sequence of {BLOCK + 1} tokens is longer than the model's "
                                  f"block_size={BLOCK}; give at most {BLOCK} tokens (or train with a "
                                  "larger model.block_size)")


def test_heads_that_do_not_divide_the_width_are_refused_by_the_attention_line():
    with pytest.raises(ConfigError) as refused:
        _model(n_embd=18, n_head=4, spread=False)
    assert str(refused.value) == "n_embd=18 is not divisible by n_head=4; choose n_head that divides n_embd"


def test_dropout_acts_in_training_mode_only():
    model, ids = _model(dropout=0.3), _ids()
    expected = gpt_by_hand(model, ids)
    assert not np.allclose(model.forward(ids).data, expected)
    model.eval()
    np.testing.assert_allclose(model.forward(ids).data, expected, rtol=1e-6, atol=1e-6)


def test_a_float32_model_computes_in_float32():
    model = GPT(V, get_backend("numpy", seed=0), block_size=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=C)
    assert {p.data.dtype for p in model.params().values()} == {np.dtype("float32")}
    ids = _ids()
    logits = model.forward(ids).data
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, gpt_by_hand(model, ids), rtol=1e-4, atol=1e-5)
