"""trainer_run.check_gradients: an autograd model and an own-gradient model pass; a wrong
gradient is caught naming the parameter and element; the model is left as it was."""

import numpy as np
import pytest

import trainer_run
from trainer_run import functions as F
from trainer_run.backend import get_backend
from trainer_run.gradient_check import GradientMismatch
from trainer_run.models import MLP, Linear


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(6, 3)).astype(np.float32), rng.integers(0, 2, size=6)


def test_an_autograd_model_passes_in_float64_and_is_restored():
    model = MLP(3, 2, get_backend("numpy", seed=0), hidden_sizes=[4], activation="tanh")
    before = {k: p.data for k, p in model.params().items()}
    errors = trainer_run.check_gradients(model, _batch())
    assert set(errors) == {"l1/W", "l1/b", "l2/W", "l2/b"} and max(errors.values()) <= 1
    for path, p in model.params().items():
        assert p.data is before[path] and p.data.dtype == np.float32


class Own:
    def __init__(self, wrong=False):
        self.l = Linear(3, 2, get_backend("numpy", seed=1))
        self.wrong = wrong

    def params(self):
        return {"l/W": self.l.W, "l/b": self.l.b}

    def loss_and_grads(self, x, t):
        z = x @ self.l.W.data.T + self.l.b.data
        d = z - np.eye(2)[t]
        loss = (d * d).sum() / len(t)
        g = 2 * d / len(t)
        grads = {"l/W": g.T @ x, "l/b": g.sum(axis=0) * (3 if self.wrong else 1)}
        return {"loss": loss}, grads


def test_an_own_gradient_model_passes_and_a_wrong_gradient_is_named():
    assert max(trainer_run.check_gradients(Own(), _batch()).values()) <= 1
    with pytest.raises(GradientMismatch, match=r"^l/b\[0\]: the model's gradient is "):
        trainer_run.check_gradients(Own(wrong=True), _batch())


def test_a_custom_loss_written_with_operators_passes():
    class Custom:
        def __init__(self):
            self.l = Linear(3, 1, get_backend("numpy", seed=2))

        def params(self):
            return {"l/W": self.l.W, "l/b": self.l.b}

        def __call__(self, x, t):
            y = self.l(x)
            target = t.reshape(-1, 1).astype(y.dtype)
            return F.mean((y - target) * (y - target)) + 0.1 * F.sum(self.l.W * self.l.W)

    errors = trainer_run.check_gradients(Custom(), _batch(), samples=2)
    assert len(errors) == 2 and max(errors.values()) <= 1
