"""The first batch tried before training (models/first_batch.py): a second input the model does not
take is named with every shape, trying changes nothing the run trains with, and a model that fits
passes."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_run import functions as F
from trainer_run.backend import get_backend
from trainer_run.data import prepare
from trainer_run.errors import ConfigError
from trainer_run.layers import BatchNorm, Dropout, Linear, Sequential
from trainer_run.models import MLP, Module, first_batch


def _data(x, y):
    return prepare((x, y), np.random.default_rng(0), 0.25)


def test_a_second_input_the_model_does_not_take_is_named_with_every_shape():
    class OneInput(Module):
        def __init__(self, backend):
            self.fc = Linear(3, 2, backend)

        def __call__(self, x, t):
            return F.softmax_cross_entropy(self.fc(x), t)

    backend = get_backend("numpy")
    x = np.zeros((20, 3), np.float32)
    one = _data(x, np.arange(20) % 2)
    two = prepare((x, x[:, :2], np.arange(20) % 2), np.random.default_rng(0), 0.25)
    with pytest.raises(ConfigError) as e:
        first_batch.check(OneInput(backend), two, backend, 4, "my.OneInput")
    assert str(e.value).startswith("model._target_=my.OneInput fails on the first batch of the data "
                                   "(inputs of shape (4, 3) and (4, 2), labels of shape (4,)): "
                                   "TypeError: ")
    first_batch.check(OneInput(backend), one, backend, 4, "my.OneInput")


def test_trying_the_first_batch_changes_nothing_a_run_trains_with():
    """Parameters, persistent values, the model's mode and the backend's random state stay."""
    backend = get_backend("numpy", seed=3)
    net = Sequential(Linear(6, 8, backend), BatchNorm(8, backend), Dropout(0.5, backend),
                     Linear(8, 2, backend))

    class Net(Module):
        def __init__(self):
            self.net = net

        def __call__(self, x, t):
            return F.softmax_cross_entropy(self.net(x), t)

    model = Net()
    data = _data(np.random.default_rng(0).normal(size=(40, 6)).astype(np.float32),
                 np.arange(40) % 2)
    before = {k: v.data.copy() for k, v in {**model.params(), **model.persistents()}.items()}
    state = backend.rng.bit_generator.state
    first_batch.check(model, data, backend, 10, "my.Net")
    after = {k: v.data for k, v in {**model.params(), **model.persistents()}.items()}
    assert before.keys() == after.keys() and model.training is True
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    assert backend.rng.bit_generator.state == state


def test_a_model_that_fits_passes():
    backend = get_backend("numpy")
    data = _data(np.zeros((20, 1, 4, 4), np.float32), np.arange(20) % 3)
    model = MLP(data.in_size, data.out_size, backend, hidden_sizes=[4])
    first_batch.check(model, data, backend, 5, "trainer_run.models.MLP")
