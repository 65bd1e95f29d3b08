"""Own-gradient models (trainer_run.own_gradients): a model that computes its loss and
gradients in plain NumPy trains exactly as the same model written with autograd, through
accumulation, loss scaling and parallel replicas; malformed gradients are refused by name."""

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli

MODELS = '''
import numpy
from trainer_run import functions as F
from trainer_run.models import Linear, Module


class Auto(Module):
    """Multinomial logistic regression with autograd."""

    def __init__(self, in_size, out_size, backend):
        self.l = Linear(in_size, out_size, backend)

    def __call__(self, x, t):
        y = self.l(x)
        return {"loss": F.softmax_cross_entropy(y, t), "accuracy": F.accuracy(y, t)}


class Own:
    """The same model, its gradients computed here in NumPy."""

    def __init__(self, in_size, out_size, backend, bad=None):
        self.l = Linear(in_size, out_size, backend)
        self.bad = bad

    def params(self):
        return {"l/W": self.l.W, "l/b": self.l.b}

    def loss_and_grads(self, x, t):
        W, b = self.l.W.data, self.l.b.data
        z = x @ W.T + b
        z = z - z.max(axis=1, keepdims=True)
        p = numpy.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        rows = numpy.arange(len(t))
        loss = -numpy.log(p[rows, t]).mean()
        g = p.copy()
        g[rows, t] -= 1
        g /= len(t)
        grads = {"l/W": g.T @ x, "l/b": g.sum(axis=0)}
        if self.bad == "path":
            grads["l/V"] = grads.pop("l/W")
        if self.bad == "shape":
            grads["l/b"] = grads["l/b"][:1]
        return {"loss": loss, "accuracy": (p.argmax(axis=1) == t).mean()}, grads
'''

COMMON = ("trainer.max_iterations=30", "trainer.log_interval=10", "trainer.eval_interval=10",
          "trainer.progress=false", "optimizer=sgd", "optimizer.learning_rate=0.5",
          "optimizer.momentum=0.9")


@pytest.mark.parametrize("extra", [(), ("updater.accum_grad=3", "loss_scale=static"),
                                   ("updater=parallel", "updater.devices=2", "kvstore=local")],
                         ids=["plain", "accumulated-scaled", "parallel"])
def test_an_own_gradient_model_follows_the_autograd_trajectory(tmp_path, extra):
    (tmp_path / "my_models.py").write_text(MODELS)
    runs = {}
    for name in ("Auto", "Own"):
        result = run_cli(f"+model._target_=my_models.{name}", *COMMON, *extra, f"hydra.run.dir={name}",
                         cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        runs[name] = (load_npz(tmp_path / name / "model.npz"), read_jsonl(tmp_path / name / "metrics.jsonl"))
    (auto, auto_rows), (own, own_rows) = runs["Auto"], runs["Own"]
    for path in ("l/W", "l/b"):
        np.testing.assert_allclose(own[path], auto[path], rtol=1e-4, atol=1e-6)
    assert not np.allclose(auto["l/W"], 0)
    for a, o in zip(auto_rows, own_rows):
        assert o["train/loss"] == pytest.approx(a["train/loss"], rel=1e-4)
        if "val/accuracy" in a:
            assert o["val/accuracy"] == pytest.approx(a["val/accuracy"])


@pytest.mark.parametrize("bad, words", [
    ("path", "Own.loss_and_grads gave a gradient for 'l/V', which is not a parameter path"),
    ("shape", "the gradient of 'l/b' has shape (1,) and the parameter (2,)")])
def test_gradients_for_unknown_paths_or_of_other_shapes_are_refused(tmp_path, bad, words):
    (tmp_path / "my_models.py").write_text(MODELS)
    result = run_cli("+model._target_=my_models.Own", f"+model.bad={bad}", *COMMON, "hydra.run.dir=r",
                     cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and words in result.stderr
