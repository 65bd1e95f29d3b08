"""model=cnn and model=resnet learn small image sets generated here, from the command line; a
run of a model with dropout and batch norm, interrupted and resumed, ends bit-identical."""

import json

import numpy as np
import pytest
from helpers import load_npz, run_cli

QUIET = ("trainer.progress=false", "dataset.normalize=unit")


def _images(path, n=300, shape=(1, 28, 28), classes=4, seed=0):
    """Noisy copies of one random prototype per class, uint8."""
    rng = np.random.default_rng(seed)
    prototypes = rng.integers(0, 256, size=(classes, *shape))
    y = rng.integers(0, classes, size=n)
    x = np.clip(prototypes[y] + rng.normal(0, 50, size=(n, *shape)), 0, 255).astype(np.uint8)
    np.savez(path, x=x, y=y)


def _summary(run):
    return json.loads((run / "summary.json").read_text())


@pytest.mark.parametrize("shape, args", [
    ((3, 12, 12), ("model.channels=[8,16]", "model.hidden=32")),
    ((2, 8, 8), ()),  # the default network on the smallest size it takes
])
def test_cnn_learns_images_of_any_size_and_channel_count(tmp_path, shape, args):
    _images(tmp_path / "img.npz", shape=shape)
    result = run_cli("model=cnn", "dataset=npz", "dataset.path=img.npz", *args, *QUIET,
                     "trainer.max_iterations=60", "trainer.eval_interval=60", "hydra.run.dir=run",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    params = load_npz(tmp_path / "run/model.npz")
    channels = [8, 16] if args else [32, 64]
    assert params["conv1/W"].shape == (channels[0], shape[0], 5, 5)
    assert params["fc1/W"].shape[1] == channels[1] * (shape[1] // 4) * (shape[2] // 4)
    assert _summary(tmp_path / "run")["val/accuracy"] >= 0.9


def test_resnet_learns_28x28_images_with_batch_statistics(tmp_path):
    _images(tmp_path / "img.npz", shape=(1, 28, 28))
    result = run_cli("model=resnet", "model.width=4", "dataset=npz", "dataset.path=img.npz", *QUIET,
                     "trainer.max_iterations=60", "trainer.eval_interval=60", "hydra.run.dir=run",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    params = load_npz(tmp_path / "run/model.npz")
    assert params["block3_1/conv2/W"].shape == (16, 16, 3, 3)
    assert not np.allclose(params["bn/avg_mean"], 0)  # running statistics were kept and saved
    assert _summary(tmp_path / "run")["val/accuracy"] >= 0.9


def test_a_refused_image_model_names_the_fix(tmp_path):
    result = run_cli("model=cnn", "trainer.max_iterations=2", *QUIET[:1], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: model=cnn ")
    assert "model=cnn needs images (C, H, W); the data's examples have shape (2,): choose model=mlp" \
        in result.stderr


REGULARISED = '''
from trainer_run import functions as F
from trainer_run.layers import BatchNorm, Conv2D, Dropout, Linear, Sequential
from trainer_run.models import Model


class Small(Model):
    def __init__(self, in_shape, out_size, backend):
        c, h, w = in_shape
        self.body = Sequential(Conv2D(c, 4, 3, backend, pad="same"), BatchNorm(4, backend), F.relu,
                               Dropout(0.3, backend), F.flatten, Linear(4 * h * w, out_size, backend))

    def forward(self, x):
        return self.body(x)
'''


def test_dropout_and_batch_norm_resume_bit_identically(tmp_path):
    _images(tmp_path / "img.npz", shape=(1, 8, 8))
    (tmp_path / "my_small.py").write_text(REGULARISED)
    common = ("+model._target_=my_small.Small", "dataset=npz", "dataset.path=img.npz", *QUIET,
              "trainer.checkpoint_interval=10", "trainer.eval_interval=10", "trainer.log_interval=10")
    for args in (("trainer.max_iterations=20", "hydra.run.dir=whole"),
                 ("trainer.max_iterations=10", "hydra.run.dir=half"),
                 ("resume=half", "trainer.max_iterations=20")):
        result = run_cli(*(common if "resume=half" not in args else ()), *args, *QUIET[:1], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    whole, half = load_npz(tmp_path / "whole/model.npz"), load_npz(tmp_path / "half/model.npz")
    assert "body/1/avg_var" in whole
    assert set(whole) == set(half) and all(np.array_equal(whole[k], half[k]) for k in whole)
    assert _summary(tmp_path / "whole")["val/loss"] == _summary(tmp_path / "half")["val/loss"]
