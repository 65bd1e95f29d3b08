"""The LSTM language model (trainer_run.models.LSTMLanguageModel): its logits against the
embedding, Chainer's LSTM step recursion (tests/functions/test_recurrent.py) fed layer by layer
and the head, by hand; the loss over the positions not ignored; gradients against finite
differences, tied and untied; dropout between layers in training mode only; the tie refusal."""

import numpy as np
import pytest

from tests.functions.test_recurrent import lstm_reference
from trainer_run import check_gradients
from trainer_run.backend import get_backend
from trainer_run.errors import ConfigError
from trainer_run.models import LSTMLanguageModel

V, T, E, H = 11, 8, 16, 12


def _model(seed=0, **kwargs):
    options = dict(n_embd=E, hidden_size=H, num_layers=2, dtype="float64")
    model = LSTMLanguageModel(V, get_backend("numpy", seed=seed, dtype="float64"), **{**options, **kwargs})
    rng = np.random.default_rng(seed + 100)
    for p in model.params().values():
        p.data[...] += rng.normal(size=p.data.shape) * 0.3  # the zero biases count too
    return model


def _ids(shape=(2, T), seed=1):
    return np.random.default_rng(seed).integers(0, V, size=shape)


def lstm_lm_by_hand(model, ids):
    p = {path: q.data for path, q in model.params().items()}
    x = p["embed/W"][ids]
    for k in range(2):
        zeros = np.zeros((len(ids), p[f"lstm/{k}/U"].shape[1]))
        x, _ = lstm_reference(x, zeros, zeros, p[f"lstm/{k}/W"], p[f"lstm/{k}/U"], p[f"lstm/{k}/b"])
    if "head/W" in p:
        return x @ p["head/W"].T + p["head/b"]
    return x @ p["embed/W"].T + p["head_b"]


@pytest.mark.parametrize("tie_weights", [False, True])
def test_the_logits_equal_embedding_lstm_and_head_by_hand(tie_weights):
    model = _model(tie_weights=tie_weights, hidden_size=E if tie_weights else H)
    paths = list(model.params())
    assert paths == (["embed/W", "lstm/0/W", "lstm/0/U", "lstm/0/b", "lstm/1/W", "lstm/1/U", "lstm/1/b"]
                     + (["head_b"] if tie_weights else ["head/W", "head/b"]))
    for ids in (_ids(), _ids((3, 5), seed=2)):
        logits = model.forward(ids).data
        assert logits.shape == ids.shape + (V,)
        np.testing.assert_allclose(logits, lstm_lm_by_hand(model, ids), rtol=1e-6, atol=1e-6)


def test_the_loss_is_the_mean_over_the_positions_not_ignored():
    model, ids, targets = _model(), _ids(), _ids(seed=3)
    targets[1, 2:5] = -1
    logits = lstm_lm_by_hand(model, ids)
    keep = targets != -1
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_p, np.where(keep, targets, 0)[..., None], -1)[..., 0][keep].mean()
    out = model(ids, targets)
    assert float(out["loss"].data) == pytest.approx(expected, rel=1e-9)
    assert float(out["accuracy"]) == pytest.approx((logits.argmax(-1) == targets)[keep].mean())


@pytest.mark.parametrize("tie_weights", [False, True])
def test_gradients_match_finite_differences(tie_weights):
    model = _model(tie_weights=tie_weights, hidden_size=E if tie_weights else H)
    targets = _ids(seed=3)
    targets[0, -1] = -1
    ratios = check_gradients(model, (_ids(), targets), samples=8)
    assert set(ratios) == set(model.params()) and max(ratios.values()) <= 1


def test_dropout_between_the_layers_in_training_mode_only():
    model, ids = _model(dropout=0.5), _ids()
    expected = lstm_lm_by_hand(model, ids)
    assert not np.allclose(model.forward(ids).data, expected)
    model.eval()
    np.testing.assert_allclose(model.forward(ids).data, expected, rtol=1e-6, atol=1e-6)


def test_tied_weights_need_the_hidden_size_equal_to_the_embedding_size():
    with pytest.raises(ConfigError) as refused:
        _model(tie_weights=True)
    assert str(refused.value) == (f"model.tie_weights needs model.hidden_size equal to model.n_embd, got "
                                  f"{H} and {E}; set them equal, or tie_weights=false")


def test_generation_carries_the_state_and_draws_the_ids_of_full_passes_by_hand():
    """Each new token runs one step from the carried state, and the ids drawn are those of
    full passes over the whole sequence by hand (inverse CDF at one random() per row)."""
    model, ids = _model(), _ids((2, 3))
    fed, embed = [], model.embed

    class Spy:  # the embedding, recording the shape of the ids it is given
        def __call__(self, x):
            fed.append(x.shape)
            return embed(x)

        def __getattr__(self, name):
            return getattr(embed, name)

    model.embed = Spy()
    drawn = model.generate(ids, 6, temperature=0.8, top_k=5, rng=np.random.default_rng(4))
    assert fed == [(2, 3)] + [(2, 1)] * 5
    model.embed = embed
    rng, expected = np.random.default_rng(4), ids
    for _ in range(6):
        z = lstm_lm_by_hand(model, expected)[:, -1] / 0.8
        z = np.where(z < np.sort(z, -1)[:, -5][:, None], -np.inf, z)
        p = np.exp(z - z.max(-1, keepdims=True))
        u = rng.random(2)
        new = [np.searchsorted(np.cumsum(row), x * row.sum(), side="right") for row, x in zip(p, u)]
        expected = np.concatenate([expected, np.array(new)[:, None]], axis=1)
    np.testing.assert_array_equal(drawn, expected)
