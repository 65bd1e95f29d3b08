"""The GPT model (trainer_run.models.GPT, nanoGPT's model.py): its logits against a NumPy
forward written here from its own parameter arrays, causality, gradients against finite
differences (the tied embedding's gradient the sum of its two uses), nanoGPT's initial values
from the seed, its refusals' lines, and generation (the key/value cache, sampling) against a
loop written here over the NumPy forward."""

import copy

import numpy as np
import pytest
from gpu_helpers import backend

from trainer_run import check_gradients
from trainer_run.autograd import backward
from trainer_run.backend import get_backend
from trainer_run.errors import ConfigError
from trainer_run.models import GPT
from trainer_run.models.generation import next_token_probabilities

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


def _probabilities_by_hand(logits, temperature=1.0, top_k=None):
    z = logits / temperature
    if top_k is not None:
        z = np.where(z < np.sort(z, axis=-1)[:, -top_k][:, None], -np.inf, z)
    return _softmax(z)


def generate_by_hand(model, ids, new, temperature=1.0, top_k=None, seed=0):
    """nanoGPT's generate over the NumPy forward: crop to the last BLOCK tokens, a full pass,
    the last logits; each row's id by inverse CDF at one ``random()`` draw per row."""
    rng = np.random.default_rng(seed)
    for _ in range(new):
        p = _probabilities_by_hand(gpt_by_hand(model, ids[:, -BLOCK:])[:, -1], temperature, top_k)
        u = rng.random(len(ids))
        drawn = [np.searchsorted(np.cumsum(row), x * row.sum(), side="right") for row, x in zip(p, u)]
        ids = np.concatenate([ids, np.array(drawn)[:, None]], axis=1)
    return ids


@pytest.mark.parametrize("options", [{}, {"temperature": 0.7, "top_k": 4}])
def test_cached_and_uncached_generation_draw_the_by_hand_ids_also_past_the_block_size(options):
    model, prompt = _model(), _ids((2, 3))
    new = BLOCK + 4
    expected = generate_by_hand(model, prompt, new, seed=5, **options)
    for cache in (True, False):
        ids = model.generate(prompt, new, rng=np.random.default_rng(5), cache=cache, **options)
        assert ids.shape == (2, 3 + new) and ids.dtype == np.int64
        np.testing.assert_array_equal(ids, expected)


def test_the_cache_feeds_one_position_a_step_until_the_block_size_then_the_cropped_context():
    model, prompt = _model(), _ids((2, 3))
    fed, forward = [], model.forward
    model.forward = lambda ids, cache=None: fed.append((ids.shape, cache is not None)) or forward(ids, cache)
    model.generate(prompt, BLOCK, rng=np.random.default_rng(0))
    cached = [((2, 3), True)] + [((2, 1), True)] * (BLOCK - 3)
    assert fed == cached + [((2, BLOCK), False)] * 2
    fed.clear()
    model.generate(prompt, 4, rng=np.random.default_rng(0), cache=False)
    assert fed == [((2, t), False) for t in range(3, 7)]


def test_top_k_1_is_greedy_decoding_by_repeated_full_passes():
    model, ids = _model(), _ids((2, 2))
    expected = ids
    for _ in range(BLOCK + 2):
        greedy = gpt_by_hand(model, expected[:, -BLOCK:])[:, -1].argmax(-1)
        expected = np.concatenate([expected, greedy[:, None]], 1)
    for seed in (0, 1):
        ids_drawn = model.generate(ids, BLOCK + 2, top_k=1, rng=np.random.default_rng(seed))
        np.testing.assert_array_equal(ids_drawn, expected)


def test_one_sampling_step_is_the_softmax_of_the_tempered_top_k_logits_drawn_by_inverse_cdf():
    model, ids = _model(), _ids((3, 5))
    logits = gpt_by_hand(model, ids)[:, -1]
    expected = _probabilities_by_hand(logits, 0.5, 3)
    probs = next_token_probabilities(model.forward(ids).data[:, -1], temperature=0.5, top_k=3)
    np.testing.assert_allclose(probs, expected, rtol=1e-9, atol=1e-12)
    assert ((probs > 0).sum(-1) == 3).all() and (probs[logits < np.sort(logits)[:, -3:-2]] == 0).all()
    np.testing.assert_allclose(next_token_probabilities(logits, top_k=V + 5), _softmax(logits), rtol=1e-12)
    rng = np.random.default_rng(7)
    u = copy.deepcopy(rng).random(3)
    drawn = model.generate(ids, 1, temperature=0.5, top_k=3, rng=rng)
    np.testing.assert_array_equal(drawn[:, :5], ids)
    for row, x, got in zip(expected, u, drawn[:, -1]):
        cdf = np.cumsum(row)
        assert (cdf[got - 1] if got else 0) <= x * cdf[-1] < cdf[got] and row[got] > 0


def test_the_same_seed_draws_the_same_ids_and_another_seed_others():
    model, prompt = _model(), _ids((2, 2))
    first, again, other = (model.generate(prompt, 10, temperature=2.0, rng=np.random.default_rng(s))
                           for s in (3, 3, 4))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_the_model_fed_in_pieces_through_its_cache_equals_the_full_pass_by_hand():
    model, ids = _model(), _ids()
    cache = model.new_cache()
    steps = [model.forward(ids[:, :4], cache).data] + [model.forward(ids[:, t:t + 1], cache).data
                                                       for t in range(4, BLOCK)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), gpt_by_hand(model, ids), rtol=1e-6, atol=1e-6)
    with pytest.raises(ConfigError) as refused:
        model.forward(ids[:, :1], cache)
    assert str(refused.value).startswith(f"a sequence of {BLOCK + 1} tokens is longer than the model's "
                                         f"block_size={BLOCK}; give at most {BLOCK} tokens")


@pytest.mark.parametrize("options, line", [
    ({"temperature": 0}, "temperature must be above 0, got 0; give temperature > 0 (1.0 samples the "
                         "model's own probabilities, lower is greedier)"),
    ({"top_k": 0}, "top_k must be an integer of at least 1, got 0; give top_k >= 1 (or None to keep "
                   "every token)"),
    ({"max_new_tokens": -1}, "max_new_tokens must be an integer of at least 0, got -1; give "
                             "max_new_tokens >= 0"),
    ({"ids": np.zeros((2, 0), dtype=int)}, "the prompt must be token ids of shape (batch, T) with T >= 1, "
                                           "got shape (2, 0); give at least one token per row"),
])
def test_generation_refusals_are_one_line_each(options, line):
    model = _model()
    arguments = {"ids": _ids((2, 2)), "max_new_tokens": 3, "rng": np.random.default_rng(0), **options}
    with pytest.raises(ConfigError) as refused:
        model.generate(**arguments)
    assert str(refused.value) == line


@pytest.mark.parametrize("training", [True, False])
def test_generation_leaves_the_model_in_its_mode_and_samples_in_evaluation_mode(training):
    model, prompt = _model(dropout=0.5), _ids((2, 3))
    model.train(training)
    ids = model.generate(prompt, 4, top_k=1)
    assert model.training is training and model.h.training is training
    assert all(block.attn.resid_dropout.training is training for block in model._blocks)
    np.testing.assert_array_equal(ids, generate_by_hand(model, prompt, 4, top_k=1))
    np.testing.assert_array_equal(model.generate(prompt, 0), prompt)


def _greedy_and_sampled(device):
    model = GPT(V, backend(device, seed=0), block_size=BLOCK, n_layer=LAYERS, n_head=HEADS, n_embd=C)
    prompt = _ids((2, 3))
    return [model.generate(prompt, BLOCK + 2, top_k=1),
            model.generate(prompt, BLOCK + 2, temperature=0.8, top_k=5, rng=np.random.default_rng(2))]


@pytest.mark.gpu
def test_generation_on_cupy_draws_the_numpy_ids():
    for got, expected in zip(_greedy_and_sampled("cupy"), _greedy_and_sampled("numpy")):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, expected)
