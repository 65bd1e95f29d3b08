"""update_bn (src/trainer_run/bn_update.py): batch normalization's running statistics recomputed
over a dataset equal, by hand, the mean over the batches of each batch's mean and unbiased
variance of the layer's input (PyTorch's cumulative average); the layer's decay, the model's
mode and the backend's generator are put back; a model without batch normalization is not run."""

import numpy as np

from trainer_run import functions as F
from trainer_run.backend import get_backend
from trainer_run.bn_update import batch_norms, update_bn
from trainer_run.data import ArrayDataset
from trainer_run.layers import BatchNorm, Dropout, Linear
from trainer_run.models import MLP
from trainer_run.module import Module


class Net(Module):
    def __init__(self, backend, in_size=3):
        self.l1 = Linear(in_size, 4, backend)
        self.bn = BatchNorm(4, backend)
        self.drop = Dropout(0.5, backend)
        self.l2 = Linear(4, 2, backend)

    def __call__(self, x, t):
        y = self.l2(self.drop(F.relu(self.bn(self.l1(x)))))
        return {"loss": F.softmax_cross_entropy(y, t)}


def test_running_statistics_are_the_mean_of_the_batches_statistics():
    backend = get_backend("numpy", seed=0)
    net = Net(backend)
    net.bn.avg_mean.data[...] = 7.0  # stale values, reset by update_bn
    net.bn.avg_var.data[...] = np.nan
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 3.0, size=(11, 3)).astype(np.float32)
    t = rng.integers(0, 2, size=11).astype(np.int32)
    net.eval()
    state = backend.rng.bit_generator.state
    assert batch_norms(net) == [net.bn]
    assert update_bn(net, ArrayDataset(x, t), 4, backend) == 3  # 4, 4, 3 examples
    h = (x @ net.l1.W.data.T + net.l1.b.data).astype(np.float64)
    batches = [h[0:4], h[4:8], h[8:11]]
    mean = np.mean([b.mean(axis=0) for b in batches], axis=0)
    var = np.mean([b.var(axis=0, ddof=1) for b in batches], axis=0)
    np.testing.assert_allclose(net.bn.avg_mean.data, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.bn.avg_var.data, var, rtol=1e-5)
    assert net.bn.decay == 0.9 and not net.training and not net.bn.training
    assert backend.rng.bit_generator.state == state


def test_a_last_batch_of_one_example_is_left_out():
    backend = get_backend("numpy", seed=0)
    net = Net(backend)
    x = np.random.default_rng(2).normal(size=(9, 3)).astype(np.float32)
    assert update_bn(net, ArrayDataset(x, np.zeros(9, np.int32)), 4, backend) == 2
    h = (x @ net.l1.W.data.T + net.l1.b.data).astype(np.float64)
    mean = (h[0:4].mean(axis=0) + h[4:8].mean(axis=0)) / 2
    np.testing.assert_allclose(net.bn.avg_mean.data, mean, rtol=1e-5, atol=1e-6)
    assert np.isfinite(net.bn.avg_var.data).all()


def test_a_model_without_batch_normalization_is_not_run():
    backend = get_backend("numpy", seed=0)
    mlp = MLP(3, 2, backend, hidden_sizes=[4])
    calls = []
    dataset = ArrayDataset(np.zeros((4, 3), np.float32), np.zeros(4, np.int32))
    dataset.take = lambda indices: calls.append(indices)
    assert batch_norms(mlp) == [] and update_bn(mlp, dataset, 2, backend) == 0 and calls == []
