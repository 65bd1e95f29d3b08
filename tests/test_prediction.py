"""``load_model(run).predict``: batches of the run's batch size whose outputs are those of the
whole array, one example with or without its batch axis, evaluation mode, no graph recorded
(the runs trained in-process by ``trainer_run.train``; the README's own model examples, trained
and predicting from the command line: tests/command/test_readme_models.py).

The references are computed here in float64 NumPy from the run's ``model.npz``."""

from __future__ import annotations

import gc
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import load_npz
from numpy.lib.stride_tricks import sliding_window_view

import trainer_run
from trainer_run import autograd
from trainer_run import functions as F
from trainer_run.params import Parameter

SHORT = ("trainer.max_iterations=12", "trainer.progress=false", "trainer.eval_interval=6")
DROPPED = '''
from trainer_run import functions as F
from trainer_run.layers import BatchNorm, Dropout, Linear
from trainer_run.models import Model, flat


class Dropped(Model):
    """linear - batch norm - ReLU - dropout(0.5) - linear."""

    def __init__(self, in_size, out_size, backend, hidden=16):
        self.l1 = Linear(in_size, hidden, backend)
        self.bn = BatchNorm(hidden, backend)
        self.drop = Dropout(0.5, backend)
        self.l2 = Linear(hidden, out_size, backend)

    def forward(self, x):
        return self.l2(self.drop(F.relu(self.bn(self.l1(flat(x))))))
'''


def _images(folder: Path, n: int = 130) -> np.ndarray:
    """``train.npz``: ``n`` uint8 images of 8x8 (no channel axis) whose class (of 3) is the
    brightest third of rows; returns the images."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, size=(n, 8, 8), dtype=np.uint8)
    y = np.stack([x[:, 0:3].mean((1, 2)), x[:, 3:5].mean((1, 2)), x[:, 5:].mean((1, 2))]).argmax(0)
    np.savez(folder / "train.npz", x=x, y=y)
    return x


@pytest.fixture(scope="module")
def cnn_run(tmp_path_factory):
    """A short ``model=cnn`` run on 8x8 images, batch size 20, and the images."""
    folder = tmp_path_factory.mktemp("cnn")
    x = _images(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        trainer_run.train(["model=cnn", "model.channels=[3,4]", "model.hidden=8", "dataset=npz",
                           "dataset.path=train.npz", "dataset.normalize=unit", "dataset.batch_size=20",
                           "hydra.run.dir=run", *SHORT])
    return folder / "run", x


def _conv_same(x, W, b):
    k = W.shape[-1]
    padded = np.pad(x, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    windows = sliding_window_view(padded, (k, k), axis=(2, 3))  # (N, C, H, W, k, k)
    return np.einsum("nchwij,ocij->nohw", windows, W) + b[None, :, None, None]


def _pool(x):
    n, c, h, w = x.shape
    return x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def _cnn_reference(run: Path, x: np.ndarray) -> np.ndarray:
    """``model=cnn``'s logits for raw uint8 images (N, H, W), in float64."""
    p = {k: v.astype(np.float64) for k, v in load_npz(run / "model.npz").items()}
    h = x[:, None].astype(np.float64) / 255
    for conv in ("conv1", "conv2"):
        h = _pool(np.maximum(_conv_same(h, p[f"{conv}/W"], p[f"{conv}/b"]), 0))
    h = np.maximum(h.reshape(len(h), -1) @ p["fc1/W"].T + p["fc1/b"], 0)
    return h @ p["fc2/W"].T + p["fc2/b"]


def _float32_rounding(a, b):
    """``a`` equals ``b`` up to float32 rounding: BLAS picks its kernel by the matrices' shapes
    (a matrix-vector product for one row), which may add the same products in another order,
    so outputs of another batch size may differ in their last bits, never more."""
    np.testing.assert_allclose(a, b, rtol=0, atol=16 * np.finfo(np.float32).eps * np.abs(b).max())


def test_batches_of_any_size_give_the_outputs_of_the_whole_array(cnn_run):
    run, x = cnn_run
    trained = trainer_run.load_model(run)
    whole = trained.predict(x, batch_size=len(x))
    assert whole.shape == (130, 3) and whole.dtype == np.float32
    np.testing.assert_allclose(whole, _cnn_reference(run, x), rtol=1e-4, atol=1e-5)
    for batch_size in (None, 7, 1, 129, 1000):
        _float32_rounding(trained.predict(x, batch_size=batch_size), whole)


def test_the_model_sees_batches_of_the_runs_batch_size_or_the_one_given(cnn_run, monkeypatch):
    run, x = cnn_run
    trained = trainer_run.load_model(run)
    seen = []
    forward = trained.model.forward
    monkeypatch.setattr(trained.model, "forward", lambda batch: seen.append(batch.shape) or forward(batch))
    trained.predict(x)  # dataset.batch_size=20
    assert seen == [(20, 1, 8, 8)] * 6 + [(10, 1, 8, 8)]
    seen.clear()
    trained.predict(x, batch_size=64)
    assert seen == [(64, 1, 8, 8)] * 2 + [(2, 1, 8, 8)]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match=f"^batch_size must be a positive integer, got {bad!r}$"):
            trained.predict(x, batch_size=bad)


def test_one_example_with_or_without_its_batch_axis(cnn_run):
    """(8, 8) and (1, 8, 8), the run's in_shape, are one image: outputs (3,); a batch of one,
    (1, 1, 8, 8), keeps its axis: (1, 3)."""
    run, x = cnn_run
    trained = trainer_run.load_model(run)
    assert trained.in_shape == (1, 8, 8)
    rows = trained.predict(x[:4])
    for one in (x[2], x[2][None], x[2].tolist()):
        single = trained.predict(one)
        assert single.shape == (3,)
        _float32_rounding(single, rows[2])
    batched = trained.predict(x[2][None, None])
    assert batched.shape == (1, 3)
    _float32_rounding(batched[0], rows[2])
    assert trained.predict(x[:0]).shape == (0, 3)


@pytest.mark.parametrize("shape", [(8,), (4, 8), (5, 2, 8, 8), (5, 1, 8, 7), ()])
def test_an_array_of_another_shape_is_one_line_naming_the_shapes(cnn_run, shape):
    trained = trainer_run.load_model(cnn_run[0])
    message = (f"predict takes one example of shape (1, 8, 8) or a batch (N, 1, 8, 8) (or (8, 8) "
               f"and (N, 8, 8) without the channel axis), as the run's examples; x has shape {shape}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        trained.predict(np.zeros(shape, np.uint8))


@pytest.fixture(scope="module")
def dropped_run(tmp_path_factory):
    """A short run of a model with batch norm and dropout on 8x8 images."""
    folder = tmp_path_factory.mktemp("dropped")
    (folder / "dropped_models.py").write_text(DROPPED)
    x = _images(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        trainer_run.train(["+model._target_=dropped_models.Dropped", "dataset=npz",
                           "dataset.path=train.npz", "dataset.normalize=unit", "hydra.run.dir=run",
                           *SHORT])
    return folder, x


def test_predict_runs_in_evaluation_mode_and_restores_the_models(dropped_run, monkeypatch):
    """No dropout and the running statistics of batch norm: the outputs are deterministic and
    those of the eval-mode forward, computed here; the model's mode and its running statistics
    are as they were."""
    folder, x = dropped_run
    monkeypatch.syspath_prepend(str(folder))
    trained = trainer_run.load_model(folder / "run")
    p = {k: v.astype(np.float64) for k, v in load_npz(folder / "run" / "model.npz").items()}
    assert not np.array_equal(p["bn/avg_mean"], 0)  # the run trained them
    h = x.reshape(len(x), -1).astype(np.float64) / 255 @ p["l1/W"].T + p["l1/b"]
    h = (h - p["bn/avg_mean"]) / np.sqrt(p["bn/avg_var"] + 2e-5) * p["bn/gamma"] + p["bn/beta"]
    reference = np.maximum(h, 0) @ p["l2/W"].T + p["l2/b"]
    trained.model.train()  # predict's own mode, whatever the model's
    first, second = trained.predict(x), trained.predict(x)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, reference, rtol=1e-4, atol=1e-5)
    assert trained.model.training and trained.model.drop.training
    np.testing.assert_array_equal(trained.model.bn.avg_mean.data, p["bn/avg_mean"].astype(np.float32))


def _functions() -> int:
    gc.collect()
    return sum(issubclass(type(o), autograd.Function) for o in gc.get_objects())  # never a dead proxy's


def test_predict_records_no_graph_and_keeps_no_function(cnn_run, monkeypatch):
    """Inside predict the autograd records nothing: the forward's output has no creator (its
    parameters need gradients, so a recording would give it one) and no function outlives
    the call."""
    run, x = cnn_run
    trained = trainer_run.load_model(run)
    outputs, recording = [], []
    forward = trained.model.forward

    def spy(batch):
        recording.append(autograd.is_recording())
        outputs.append(forward(batch))
        return outputs[-1]

    monkeypatch.setattr(trained.model, "forward", spy)
    before = _functions()
    trained.predict(x)
    assert recording == [False] * 7 and all(y.creator is None for y in outputs)
    assert _functions() == before
    assert autograd.is_recording()
    assert forward(x[:2, None] / np.float32(255)).creator is not None  # outside predict: recorded


def test_no_grad_belongs_to_the_thread_that_enters_it():
    """A prediction in one thread leaves another thread's recording on (Chainer's config is
    per thread)."""
    W = Parameter(np.ones((2, 3), np.float32))
    inside, entered, done = [], threading.Event(), threading.Event()

    def predicting():
        with autograd.no_grad():
            inside.append(F.linear(np.ones((1, 3), np.float32), W).creator)
            entered.set()
            done.wait(10)

    thread = threading.Thread(target=predicting)
    thread.start()
    entered.wait(10)
    recorded = F.linear(np.ones((1, 3), np.float32), W).creator
    done.set()
    thread.join()
    assert inside == [None] and recorded is not None and autograd.is_recording()


def test_a_model_without_forward_is_told_what_predict_needs(cnn_run):
    trained = trainer_run.load_model(cnn_run[0])
    trained.model = type("Plain", (), {"params": dict})()
    with pytest.raises(TypeError, match=r"^Plain has no forward\(x\); predict needs one"):
        trained.predict(cnn_run[1])
