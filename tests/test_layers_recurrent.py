"""The recurrent layers LSTM and GRU (trainer_run.layers): their paths and initial values
(Chainer's L.LSTM, MXNet's GRU), stacked layers against the hand-written step recursion of
tests/functions/test_recurrent.py fed layer by layer, the final states, dropout between layers
in training mode only, a state of the wrong length refused, and gradients against finite
differences (trainer_run.check_gradients), and the gradients on CuPy against NumPy."""

import numpy as np
import pytest
from gpu_helpers import backend, host

import trainer_run
from tests.functions.test_recurrent import gru_reference, lstm_reference
from trainer_run import functions as F
from trainer_run.autograd import backward
from trainer_run.backend import get_backend
from trainer_run.errors import ConfigError
from trainer_run.layers import GRU, LSTM
from trainer_run.models import Module

B, T, IN, H = 2, 4, 3, 5


def _backend(seed=0):
    return get_backend("numpy", seed=seed, dtype="float64")


def _x():
    return np.random.default_rng(3).normal(size=(B, T, IN))


def _lstm_by_hand(model, x, state):
    """Each layer's weights through the step recursion, layer 0's outputs into layer 1."""
    final = []
    for k in range(2):
        layer = getattr(model, str(k))
        h, c = state[k] if state else (np.zeros((B, H)), np.zeros((B, H)))
        x, c = lstm_reference(x, h, c, layer.W.data, layer.U.data, layer.b.data)
        final.append((x[:, -1], c))
    return x, final


def _gru_by_hand(model, x, state):
    final = []
    for k in range(2):
        layer = getattr(model, str(k))
        h = state[k] if state else np.zeros((B, H))
        x = gru_reference(x, h, layer.W.data, layer.U.data, layer.b_x.data, layer.b_h.data)
        final.append(x[:, -1])
    return x, final


def test_lstm_paths_and_chainers_initial_values():
    model = LSTM(IN, H, _backend(), num_layers=2, dtype="float64")
    assert list(model.params()) == ["0/W", "0/U", "0/b", "1/W", "1/U", "1/b"]
    assert model.params()["0/W"].shape == (4 * H, IN) and model.params()["1/W"].shape == (4 * H, H)
    b = model.params()["0/b"].data.reshape(H, 4)  # unit j's gates a, i, f, o
    np.testing.assert_array_equal(b, np.tile([0.0, 0.0, 1.0, 0.0], (H, 1)))
    big = LSTM(400, 100, _backend(), dtype="float64")  # LeCun normal: std 1/sqrt(fan_in)
    assert big.params()["0/W"].data.std() == pytest.approx(1 / np.sqrt(400), rel=0.02)
    assert big.params()["0/U"].data.std() == pytest.approx(1 / np.sqrt(100), rel=0.02)


def test_gru_paths_and_zero_biases():
    model = GRU(IN, H, _backend(), num_layers=2, dtype="float64")
    assert list(model.params()) == ["0/W", "0/U", "0/b_x", "0/b_h", "1/W", "1/U", "1/b_x", "1/b_h"]
    assert model.params()["1/U"].shape == (3 * H, H)
    assert not model.params()["0/b_x"].data.any() and not model.params()["1/b_h"].data.any()


@pytest.mark.parametrize("with_state", [False, True])
def test_stacked_lstm_feeds_each_layers_outputs_into_the_next(with_state):
    model = LSTM(IN, H, _backend(), num_layers=2, dtype="float64")
    rng = np.random.default_rng(8)
    state = tuple((rng.normal(size=(B, H)), rng.normal(size=(B, H))) for _ in range(2))
    state = state if with_state else None
    ys, final = model(_x(), state)
    expected, expected_final = _lstm_by_hand(model, _x(), state)
    np.testing.assert_allclose(ys.data, expected, rtol=1e-6, atol=1e-6)
    for (h, c), (eh, ec) in zip(final, expected_final, strict=True):
        assert isinstance(h, np.ndarray) and isinstance(c, np.ndarray)  # detached
        np.testing.assert_allclose(h, eh, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(c, ec, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("with_state", [False, True])
def test_stacked_gru_feeds_each_layers_outputs_into_the_next(with_state):
    model = GRU(IN, H, _backend(), num_layers=2, dtype="float64")
    state = tuple(np.random.default_rng(9).normal(size=(2, B, H))) if with_state else None
    ys, final = model(_x(), state)
    expected, expected_final = _gru_by_hand(model, _x(), state)
    np.testing.assert_allclose(ys.data, expected, rtol=1e-6, atol=1e-6)
    for h, eh in zip(final, expected_final, strict=True):
        np.testing.assert_allclose(h, eh, rtol=1e-6, atol=1e-6)


def test_the_state_carries_over_as_one_longer_sequence():
    model = GRU(IN, H, _backend(), num_layers=2, dtype="float64")
    x = _x()
    whole, _ = model(x)
    first, state = model(x[:, :2])
    second, _ = model(x[:, 2:], state)
    np.testing.assert_allclose(np.concatenate([first.data, second.data], axis=1), whole.data, rtol=1e-12)


def test_dropout_applies_between_layers_in_training_mode_only():
    model = LSTM(IN, H, _backend(seed=4), num_layers=2, dropout=0.5, dtype="float64")
    twin = _backend(seed=4)  # the same generator, advanced by the same draws
    LSTM(IN, H, twin, num_layers=2, dropout=0.5, dtype="float64")
    ys, _ = model(_x())
    weights = [p.data for p in model.params().values()]
    h1, _ = lstm_reference(_x(), np.zeros((B, H)), np.zeros((B, H)), *weights[:3])
    dropped = F.dropout(h1, 0.5, rng=twin.rng).data
    assert not np.allclose(dropped, h1)
    expected, _ = lstm_reference(dropped, np.zeros((B, H)), np.zeros((B, H)), *weights[3:])
    np.testing.assert_allclose(ys.data, expected, rtol=1e-6, atol=1e-6)
    model.eval()
    expected, _ = _lstm_by_hand(model, _x(), None)
    np.testing.assert_allclose(model(_x())[0].data, expected, rtol=1e-6, atol=1e-6)


def test_a_state_of_the_wrong_length_is_refused():
    model = LSTM(IN, H, _backend(), num_layers=2, dtype="float64")
    with pytest.raises(ConfigError, match=r"LSTM: state must hold one entry per layer \(2\), got 1"):
        model(_x(), ((np.zeros((B, H)), np.zeros((B, H))),))


class Probe(Module):
    """``sum(outputs * R)`` for fixed random ``R``: a loss to check the layers' gradients."""

    def __init__(self, body):
        self.body = body
        self.R = np.random.default_rng(5).normal(size=(B, T, H))

    def __call__(self, x):
        return F.sum(F.mul(self.body(x)[0], self.R))


@pytest.mark.parametrize("layer", [LSTM, GRU])
def test_stacked_layer_gradients_match_finite_differences(layer):
    model = Probe(layer(IN, H, _backend(), num_layers=2, dtype="float64"))
    errors = trainer_run.check_gradients(model, (_x(),), samples=8)
    assert len(errors) == len(model.params()) and max(errors.values()) <= 1


def _forward_backward(device, layer):
    b = backend(device, seed=2, dtype="float32")
    model = Probe(layer(IN, H, b, num_layers=2))
    model.R = b.asarray(model.R.astype(np.float32))
    backward(model(b.asarray(_x().astype(np.float32))))
    return [host(p.grad) for p in model.params().values()]


@pytest.mark.gpu
@pytest.mark.parametrize("layer", [LSTM, GRU])
def test_cupy_equals_numpy(layer):
    got, expected = _forward_backward("cupy", layer), _forward_backward("numpy", layer)
    for got, expected in zip(got, expected, strict=True):
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=3e-6)
