"""Parallel replicas in one process (updaters/parallel.py): they equal the standard update on the whole
batch, and their gradients are summed onto the main replica through the kvstore; with
grad_reduce=sum, Chainer's sum of the replicas' mean-loss gradients, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tests.updaters.test_updaters import DATA, assert_params_close, make, run
from tests.updaters.test_weighting import Fixed, gradients
from trainer_run import devices, optimizers
from trainer_run import functions as F
from trainer_run import kvstore as kvstores
from trainer_run.errors import ConfigError
from trainer_run.module import Module
from trainer_run.params import Parameter
from trainer_run.updaters import Batches, GradientSync, ParallelUpdater


@pytest.mark.parametrize("devices", [2, 3, [0, 1]])
def test_parallel_replicas_equal_the_standard_update_on_the_whole_batch(devices):
    """3 replicas split 100 examples 34/33/33: each backward is weighted by its share."""
    standard = make()
    parallel = make(cls=ParallelUpdater, devices=devices, kvstore=kvstores.create("local"))
    try:
        assert_params_close(run(standard, 10), run(parallel, 10))
        main = parallel.stores["main"]
        for store in parallel.replica_stores[1:]:
            for group, source in zip(store.groups, main.groups):
                np.testing.assert_array_equal(group.data, source.data)
        assert float(parallel.observation["loss"]) == pytest.approx(float(standard.observation["loss"]),
                                                                    rel=1e-5)
    finally:
        parallel.finalize()


def test_parallel_sums_gradients_onto_the_main_replica_through_the_kvstore():
    parallel = make(cls=ParallelUpdater, devices=2, kvstore=kvstores.create("device"))
    pushed = []
    original = parallel.kvstore.pushpull
    parallel.kvstore.pushpull = lambda key, values, out: (pushed.append((key, len(values))),
                                                         original(key, values, out=out))
    order = np.random.default_rng(1).permutation(len(DATA.train))[:100]
    parallel._iterators["main"] = Fixed(DATA.train, [order])
    got = gradients(parallel)
    standard = make()
    standard._iterators["main"] = Fixed(DATA.train, [order])
    assert_params_close(got, gradients(standard), rtol=1e-5, atol=1e-7)
    assert pushed == [(k, 2) for k in range(len(parallel.stores["main"].groups))]
    parallel.finalize()


class _OnGPU:
    """What ParallelUpdater asks of a CuPy backend before anything else: its device."""

    name, device = "cupy", 0


@pytest.mark.parametrize("visible, asked, words", [
    (1, 2, "devices=2 asks for GPUs 0, 1, but 1 GPU is visible (id 0)"),
    (4, 8, "devices=8 asks for GPUs 0, 1, 2, 3, 4, 5, 6, 7, but 4 GPUs are visible (ids 0, 1, 2, 3)"),
    (2, [0, 2], "devices=[0, 2] asks for GPUs 0, 2, but 2 GPUs are visible (ids 0, 1)"),
    (0, 1, "devices=1 asks for GPU 0, but no GPU is visible"),
])
def test_parallel_updater_refuses_more_gpus_than_visible(monkeypatch, visible, asked, words):
    monkeypatch.setattr(devices, "gpu_count", lambda: visible)
    with pytest.raises(ConfigError) as e:
        ParallelUpdater(None, None, None, devices=asked, batches=Batches(_OnGPU()))
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


class LinearRegression(Module):
    """y = x w + b with the mean squared error over the batch."""

    def __init__(self, w, b):
        self.w = Parameter(np.array(w, dtype="float32"))
        self.b = Parameter(np.array(b, dtype="float32"))

    def __call__(self, x, t):
        return {"loss": F.mean_squared_error(F.linear(x, self.w, self.b), t)}


def shard_gradient(x, t, w, b):
    """The gradient of the mean squared error of ``x w + b`` on one shard, in closed form
    (float64): with residuals r_j = x_j . w + b - t_j, dL/dw = 2/m sum_j r_j x_j and
    dL/db = 2/m sum_j r_j."""
    r = x @ w[0] + b[0] - t[:, 0]
    return 2 / len(x) * (r @ x), 2 / len(x) * r.sum()


@pytest.mark.parametrize("replicas, size", [(2, 8), (3, 7)])
def test_grad_reduce_sum_adds_the_replicas_mean_loss_gradients_as_chainer_does(replicas, size):
    """Chainer's ParallelUpdater: every replica's loss.backward() on its shard (example j to
    replica j mod n), model_main.addgrads(model) for the others; so the gradient is the sum of
    the shards' mean-loss gradients: n times the whole batch's for equal shards (8 over 2),
    the plain sum for unequal ones (7 over 3: 3, 2, 2)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(size, 3)).astype("float32")
    t = rng.normal(size=(size, 1)).astype("float32")
    w, b = [[0.5, -1.0, 2.0]], [0.25]
    examples = [(x[j], t[j]) for j in range(size)]
    updater = ParallelUpdater(WholeBatch(examples), optimizers.create("sgd", learning_rate=0.1),
                              LinearRegression(w, b), devices=replicas,
                              sync=GradientSync(kvstores.create("local")), grad_reduce="sum")
    try:
        metrics = updater.compute_gradients(0)
        got = {k: p.grad.copy() for k, p in updater.get_model().params().items()}
    finally:
        updater.finalize()
    x64, t64, w64, b64 = (np.asarray(a, dtype=np.float64) for a in (x, t, w, b))
    shards = [shard_gradient(x64[r::replicas], t64[r::replicas], w64, b64) for r in range(replicas)]
    np.testing.assert_allclose(got["w"][0], sum(gw for gw, _ in shards), rtol=1e-5)
    np.testing.assert_allclose(got["b"][0], sum(gb for _, gb in shards), rtol=1e-5)
    whole_w, whole_b = shard_gradient(x64, t64, w64, b64)
    if size % replicas == 0:
        np.testing.assert_allclose(got["w"][0], replicas * whole_w, rtol=1e-5)
        np.testing.assert_allclose(got["b"][0], replicas * whole_b, rtol=1e-5)
    # the metrics stay the whole batch's: its mean squared error
    residual = x64 @ w64[0] + b64[0] - t64[:, 0]
    assert float(metrics["loss"]) == pytest.approx(float(residual @ residual / size), rel=1e-5)


def test_grad_reduce_is_mean_or_sum():
    with pytest.raises(ConfigError, match=r"^grad_reduce='max' is unknown; choose one of mean, sum$"):
        ParallelUpdater(None, None, None, grad_reduce="max")


class WholeBatch:
    """The whole list of examples as every batch."""

    def __init__(self, examples):
        self.dataset = examples

    def next(self):
        return list(self.dataset)

    def finalize(self):
        pass
