"""The built-in models and the layers on CuPy: built from the same seed, one training-mode
forward and backward gives NumPy's loss, metrics, every parameter's gradient and the updated
batch statistics, and an evaluation-mode forward NumPy's outputs (float32 tolerance)."""

from __future__ import annotations

import numpy
import pytest
from gpu_helpers import assert_close, backend, host

from trainer_run import functions as F
from trainer_run import layers
from trainer_run.autograd import as_data, backward, no_grad
from trainer_run.functions import ACTIVATIONS
from trainer_run.models import CNN, MLP, LogisticRegression, ResNet, persistents_of

# float32 against float64 on NumPy (the same inputs and initial values) stays within 2% of
# SHALLOW for every model here; the GPU rounds once more, in another order (cuBLAS, CuPy's
# reductions, fused multiply-adds). The convolutional networks get 5 times more room: each of
# their layers rounds anew, and batch normalization divides by a batch's standard deviation,
# which scales a rounding difference with it.
TOLERANCE = {"shallow": (2e-5, 3e-6), "deep": (1e-4, 2e-5)}

MODELS = {
    **{f"mlp_{a}": (lambda b, a=a: MLP(12, 3, b, hidden_sizes=[16, 8], activation=a), (12,), "shallow")
       for a in ACTIVATIONS},
    "mlp_regression": (lambda b: MLP(12, 2, b, hidden_sizes=[8], task="regression"), (12,), "shallow"),
    "logistic_regression": (lambda b: LogisticRegression(12, 3, b), (12,), "shallow"),
    "cnn": (lambda b: CNN((1, 8, 8), 3, b, channels=(4, 6), ksize=3, hidden=16), (1, 8, 8), "deep"),
    "cnn_5x5": (lambda b: CNN((2, 8, 8), 3, b, channels=(4,), hidden=8), (2, 8, 8), "deep"),
    "resnet": (lambda b: ResNet((3, 8, 8), 3, b, depth=8, width=4), (3, 8, 8), "deep"),
    "resnet_14": (lambda b: ResNet((1, 8, 8), 3, b, depth=14, width=4), (1, 8, 8), "deep"),
}


def _batch(in_shape, regression: bool, n: int = 6):
    rng = numpy.random.default_rng(4)
    x = rng.standard_normal((n, *in_shape)).astype(numpy.float32)
    t = rng.standard_normal((n, 2)).astype(numpy.float32) if regression else rng.integers(0, 3, n)
    return x, t


def model_step(device: str, name: str) -> dict:
    """Metrics, gradients and batch statistics of one training step, and the evaluation
    outputs after it, on the host."""
    build, in_shape, _ = MODELS[name]
    b = backend(device, seed=3)
    model = build(b)
    x, t = (b.asarray(a) for a in _batch(in_shape, name == "mlp_regression"))
    metrics = model(x, t)
    backward(metrics["loss"])
    result = {f"train/{k}": host(as_data(v)) for k, v in metrics.items()}
    result.update({f"grad/{k}": host(p.grad) for k, p in model.params().items()})
    result.update({f"persistent/{k}": host(p.data) for k, p in persistents_of(model).items()})
    model.eval()
    with no_grad():
        result["eval/outputs"] = host(model.forward(x).data)
    return result


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_training_step_and_evaluation_on_cupy_are_numpys(name):
    assert_close(model_step("cupy", name), model_step("numpy", name), *TOLERANCE[MODELS[name][2]],
                 name)


def _layer_cases():
    """name -> (build(backend) -> layer, input(rng) -> array)."""
    images = lambda rng: rng.standard_normal((3, 4, 5, 5)).astype(numpy.float32)  # noqa: E731
    rows = lambda rng: rng.standard_normal((5, 6)).astype(numpy.float32)  # noqa: E731
    return {
        "linear": (lambda b: layers.Linear(6, 4, b), rows),
        "conv2d_same": (lambda b: layers.Conv2D(4, 6, 3, b, pad="same"), images),
        "conv2d_groups_dilate": (lambda b: layers.Conv2D(4, 4, 3, b, dilate=2, groups=2, bias=False),
                                 images),
        "batch_norm": (lambda b: layers.BatchNorm(4, b), images),
        "layer_norm": (lambda b: layers.LayerNorm(6, b), rows),
        "embedding": (lambda b: layers.Embedding(7, 3, b), lambda rng: rng.integers(0, 7, (4, 2))),
        "dropout": (lambda b: layers.Sequential(layers.Linear(6, 8, b), layers.Dropout(0.4, b)), rows),
        "sequential": (lambda b: layers.Sequential(layers.Conv2D(4, 3, 3, b, pad=1), layers.BatchNorm(3, b),
                                                   F.relu, layers.Conv2D(3, 2, 1, b)), images),
    }


LAYERS = _layer_cases()


def layer_step(device: str, name: str) -> dict:
    build, draw = LAYERS[name]
    b = backend(device, seed=5)
    layer = build(b)
    rng = numpy.random.default_rng(6)
    x = b.asarray(draw(rng))
    y = layer(x)
    c = b.asarray(numpy.random.default_rng(7).standard_normal(y.shape).astype(numpy.float32))
    backward(F.sum(F.mul(y, c)))
    result = {"y": host(y.data), **{f"grad/{k}": host(p.grad) for k, p in layer.params().items()},
              **{f"persistent/{k}": host(p.data) for k, p in layer.persistents().items()}}
    layer.eval()
    with no_grad():
        result["eval/y"] = host(layer(x).data)
    return result


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layer_on_cupy_is_numpys(name):
    assert_close(layer_step("cupy", name), layer_step("numpy", name), *TOLERANCE["shallow"], name)
