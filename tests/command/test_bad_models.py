"""A user's model and the data it trains on (issue 36, item 17): the README's ``TwoLayer``, as
the README writes it, trains on images (``linear`` flattens what it is given, as Chainer's
does); a model that does not fit its data fails when the run is built, in one line naming its
``_target_``, the batch's shapes, the error and where in the user's code, before anything is
written; any other error of the user's code keeps its traceback."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_npz

README = Path(__file__).resolve().parents[2] / "README.md"
SHORT = ("trainer.max_iterations=6", "trainer.progress=false", "trainer.eval_interval=3",
         "dataset.batch_size=8", "hydra.run.dir=run")


def _readme_block(containing: str) -> str:
    """The README's Python block that holds ``containing``, as written there."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, containing
    return found[0]


def _user(folder: Path, *arguments) -> subprocess.CompletedProcess:
    """The installed ``trainer-run`` in ``folder`` (importable as the user's folder is)."""
    installed = Path(sys.executable).parent / "trainer-run"
    script = str(installed) if installed.exists() else shutil.which("trainer-run")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([script, *map(str, arguments), *SHORT], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def _images(folder: Path, shape=(8, 8), n=48) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.random((n, *shape)).astype(np.float32)
    np.savez(folder / "images.npz", x=x, y=(x.reshape(n, -1).mean(axis=1) > 0.5).astype(np.int64))
    return x


# ----------------------------------------------------------------------- the README's model
@pytest.mark.parametrize("shape", [(8, 8), (3, 4, 4)])
def test_the_readmes_two_layer_model_trains_and_predicts_on_images(tmp_path, shape):
    (tmp_path / "my_models.py").write_text(_readme_block("class TwoLayer"))
    x = _images(tmp_path, shape)
    result = _user(tmp_path, "+model._target_=my_models.TwoLayer", "+model.hidden=16",
                   "dataset=npz", "dataset.path=images.npz")
    assert result.returncode == 0, result.stderr
    p = {k: v.astype(np.float64) for k, v in load_npz(tmp_path / "run" / "model.npz").items()}
    assert p["fc1/W"].shape == (16, int(np.prod(shape)))
    predict = ("import numpy, trainer_run\nx = numpy.load('images.npz')['x'][:5]\n"
               "numpy.save('out.npy', trainer_run.load_model('run', 'last').predict(x))\n")
    done = subprocess.run([sys.executable, "-c", predict], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = x[:5].reshape(5, -1).astype(np.float64)
    reference = np.tanh(rows @ p["fc1/W"].T + p["fc1/b"]) @ p["fc2/W"].T + p["fc2/b"]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), reference, rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------- a model that does not fit
BAD_MODELS = '''
import numpy
from trainer_run import functions as F
from trainer_run.models import Linear, Module


class Fixed(Module):                      # sized for 10 features whatever the data
    def __init__(self, out_size, backend):
        self.fc = Linear(10, out_size, backend)

    def forward(self, x):
        return self.fc(x)

    def __call__(self, x, t):
        return F.softmax_cross_entropy(self.forward(x), t)


class OneOutput(Module):                  # one output for a classifier of several classes
    def __init__(self, in_size, backend):
        self.fc = Linear(in_size, 1, backend)

    def __call__(self, x, t):
        return F.softmax_cross_entropy(self.fc(x), t)


class OwnGradients:                       # NumPy on rows, given images
    def __init__(self, in_size, out_size, backend):
        self.l = Linear(in_size, out_size, backend)

    def params(self):
        return {"l/W": self.l.W, "l/b": self.l.b}

    def loss_and_grads(self, x, t):
        z = x @ self.l.W.data.T
        return {"loss": z.mean()}, {}


class Buggy(Module):                      # a bug of the user's, not a misfit
    def __init__(self, in_size, out_size, backend):
        self.fc = Linear(in_size, out_size, backend)

    def __call__(self, x, t):
        return F.softmax_cross_entropy(self.fc(x), labels)
'''


@pytest.mark.parametrize("name, error, line", [
    ("Fixed", "ValueError: matmul: Input operand 1 has a mismatch in its core dimension 0",
     "in forward"),
    ("OneOutput", "IndexError: index 1 is out of bounds for axis 1 with size 1", "in __call__"),
    ("OwnGradients", "ValueError: matmul: Input operand 1 has a mismatch", "in loss_and_grads"),
])
def test_a_model_that_does_not_fit_its_data_is_named_in_one_line(tmp_path, name, error, line):
    (tmp_path / "bad_models.py").write_text(BAD_MODELS)
    _images(tmp_path)
    result = _user(tmp_path, f"+model._target_=bad_models.{name}", "dataset=npz",
                   "dataset.path=images.npz")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: model._target_=bad_models.{name} fails on the first batch "
                               "of the data (inputs of shape (8, 1, 8, 8), labels of shape (8,)): "
                               f"{error}")
    assert re.search(rf" at bad_models\.py:\d+ {line}; build the model for this data: it receives "
                     r"in_size=64, in_shape=\(1, 8, 8\) and out_size=2 when it takes those "
                     r"arguments$", lines[0]), lines[0]
    assert not (tmp_path / "run").exists()


def test_a_bug_in_the_users_model_keeps_its_traceback(tmp_path):
    (tmp_path / "bad_models.py").write_text(BAD_MODELS)
    result = _user(tmp_path, "+model._target_=bad_models.Buggy")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "NameError: name 'labels' is not defined" in result.stderr
    assert not (tmp_path / "run").exists()
