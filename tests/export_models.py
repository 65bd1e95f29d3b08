"""Tiny models with random parameters, wrapped as a loaded run's model
(:class:`trainer_run.runner.trained.Trained`), for the tests of ``tests/export/``: each built-in
architecture, a user's model made of the built-in layers and functions, and one of ids through
an embedding."""

from __future__ import annotations

import numpy

from trainer_run import functions as F
from trainer_run.backend import get_backend
from trainer_run.layers import BatchNorm, Conv2D, Dropout, Embedding, LayerNorm, Linear
from trainer_run.models import CNN, MLP, LogisticRegression, Model, ResNet
from trainer_run.params import Parameter
from trainer_run.runner.trained import Trained

IMAGES = (3, 8, 8)
RAW = {"unit": {"dtype": "uint8", "min": 0, "max": 255, "whole": True},
       "standardize": {"dtype": "float64", "min": -3.0, "max": 5.0, "whole": False},
       "none": {"dtype": "float32", "min": -2.0, "max": 2.0, "whole": False}}


class Layered(Model):
    """A user's model of the built-in layers and functions: convolution, batch norm, dropout,
    average pooling, leaky ReLU, transpose, means and sums, sigmoid and tanh, concatenation, a
    matrix product with a parameter, layer norm, arithmetic and log-softmax."""

    def __init__(self, in_shape, out_size, backend):
        self.conv = Conv2D(in_shape[0], 4, 3, backend, pad=1)
        self.bn = BatchNorm(4, backend)
        self.drop = Dropout(0.5, backend)
        self.fc = Linear(4 * 4 * 4 + 8, 8, backend)
        self.mix = Parameter(backend.asarray(numpy.eye(8, dtype=numpy.float32)))
        self.norm = LayerNorm(8, backend)
        self.out = Linear(8, out_size, backend)

    def forward(self, x):
        h = F.leaky_relu(self.bn(self.conv(x)), 0.1)
        h = F.transpose(self.drop(F.average_pooling_2d(h, 2)), (0, 1, 3, 2))
        side = F.sigmoid(F.mean(h, axis=(2, 3)) + F.sum(h, axis=(1, 3)))
        h = F.concat([F.flatten(h), side, F.tanh(side)], axis=1)
        h = self.norm(F.matmul(self.fc(h), self.mix))
        return F.log_softmax(self.out(h * 0.5 - h / (F.exp(-F.relu(h)) + 1.0)))


class Embedded(Model):
    """Ids ``(N, 3)`` in ``[0, 10)`` through an embedding table, then a linear layer."""

    def __init__(self, out_size, backend):
        self.embed = Embedding(10, 4, backend)
        self.fc = Linear(12, out_size, backend)

    def forward(self, ids):
        return self.fc(F.flatten(self.embed(ids)))


def built(name: str, backend):
    """The model ``name`` (a built-in's config name, ``layered`` or ``embedded``) for
    :data:`IMAGES` (``embedded``: 3 ids), 3 classes."""
    size = int(numpy.prod(IMAGES))
    return {"mlp": lambda: MLP(size, 3, backend, hidden_sizes=(6, 5), activation="gelu"),
            "mlp_tanh": lambda: MLP(size, 3, backend, hidden_sizes=(4,), activation="tanh"),
            "logistic_regression": lambda: LogisticRegression(size, 3, backend),
            "cnn": lambda: CNN(IMAGES, 3, backend, channels=(2, 3), ksize=3, hidden=7),
            "resnet": lambda: ResNet(IMAGES, 3, backend, depth=8, width=2),
            "layered": lambda: Layered(IMAGES, 3, backend),
            "embedded": lambda: Embedded(3, backend)}[name]()


def randomized(model, seed: int = 1):
    """``model`` with every parameter and persistent value drawn at random (variances
    positive), so that no layer is the identity it starts as."""
    rng = numpy.random.default_rng(seed)
    for holder in {**model.params(), **model.persistents()}.values():
        values = rng.normal(0.0, 0.5, holder.data.shape)
        if holder.name.endswith("avg_var"):
            values = rng.uniform(0.5, 2.0, holder.data.shape)
        holder.data[...] = values.astype(holder.data.dtype)
    return model


def trained(model, normalize: str = "unit", in_shape=IMAGES, raw=None) -> Trained:
    """``model`` as a loaded run's, with ``normalize``'s values for inputs of ``in_shape``."""
    record = {"task": "classification", "in_shape": list(in_shape), "out_size": 3,
              "normalize": normalize, "inputs": raw or RAW[normalize]}
    if normalize == "unit":
        record["scale"] = 255.0
    if normalize == "standardize":
        rng = numpy.random.default_rng(7)
        record["mean"] = rng.normal(1.0, 1.0, in_shape).astype(numpy.float32)
        record["std"] = rng.uniform(0.5, 3.0, in_shape).astype(numpy.float32)
    return Trained(model, record, batch_size=4)


def raw_inputs(normalize: str, n: int, seed: int, in_shape=IMAGES) -> numpy.ndarray:
    """``n`` raw inputs of the kind ``normalize``'s run read."""
    rng = numpy.random.default_rng(seed)
    if normalize == "unit":
        return rng.integers(0, 256, (n, *in_shape)).astype(numpy.uint8)
    low, high = RAW[normalize]["min"], RAW[normalize]["max"]
    return rng.uniform(low, high, (n, *in_shape)).astype(RAW[normalize]["dtype"])


def backend():
    return get_backend("numpy", seed=0)
