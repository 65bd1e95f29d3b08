"""The updaters on CuPy: a few updates of an MLP on the same batches end at NumPy's
parameters, with accumulation, static and dynamic loss scaling, float16 with float32 masters,
an overflow and a non-finite gradient skipped, clipping by global norm, and the parallel
updater over the GPUs present (one replica on one GPU)."""

from __future__ import annotations

import numpy
import pytest
from gpu_helpers import RENAME, assert_close, backend, host
from helpers import make_synthetic

from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.autograd import as_data
from trainer_run.data import SerialIterator
from trainer_run.loss_scaling import DynamicLossScaler, LossScaler
from trainer_run.models import MLP
from trainer_run.updaters import ParallelUpdater, StandardUpdater, updater_of

DATA = make_synthetic("spirals", 1000, 0.2, numpy.random.default_rng(0))  # 800 training examples
UPDATES = 6
# float32: one forward and backward per update round as in test_gpu_models (within 2e-5 of
# NumPy's), and 6 momentum steps of lr 0.1 add at most a few such differences.
FLOAT32 = (1e-4, 1e-5)
# float16: both backends round every operation to float16 (2**-11 relative), in another order
# and cuBLAS sums float16 products in float32, so gradients agree to about 1e-2 relative; SGD
# moves a weight by lr * g per step, so after 6 steps the float32 masters differ by a few
# 1e-3 and their float16 copies by that plus an ulp (5e-4 to 2e-3 at these magnitudes).
FLOAT16 = (1e-2, 5e-3)


def gpu_count(device: str) -> int:
    """The CUDA devices CuPy sees (1 where ``device`` is built as NumPy, in a dry run)."""
    if RENAME.get(device, device) == "numpy":
        return 1
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


class Inject:
    """A ``backward_on_finish`` hook writing ``value`` into the first gradient at the
    iteration ``at`` (once: a retried iteration computes clean gradients)."""

    def __init__(self, model, at, value):
        self.param, self.at, self.value, self.hit = next(iter(model.params().values())), at, value, False

    def __call__(self, iteration):
        if iteration == self.at and not self.hit:
            self.hit = True
            grad = self.param.grad
            grad[(0,) * grad.ndim] = self.value


class NanLoss:
    """The model as the updater's loss function, whose loss (and so every gradient) is NaN on
    the first batch of iteration ``at`` (``batches`` batches an iteration)."""

    def __init__(self, model, at, batches):
        self.model, self.call, self.calls = model, at * batches + 1, 0

    def __call__(self, *batch):
        out = self.model(*batch)
        self.calls += 1
        return {**out, "loss": out["loss"] * float("nan")} if self.calls == self.call else out


SCENARIOS = {
    "sgd": {},
    "adam": {"optimizer": "adam"},
    "accum_grad_2": {"batch_size": 50, "accum_grad": 2},
    "accum_grad_3_adam": {"batch_size": 40, "accum_grad": 3, "optimizer": "adam"},
    "clip_global_norm": {"clip_global_norm": 0.2},
    "static_scale": {"loss_scaler": lambda: LossScaler(1024)},
    "dynamic_scale": {"loss_scaler": lambda: DynamicLossScaler(scale=8, interval=2)},
    "dynamic_scale_overflow": {"loss_scaler": lambda: DynamicLossScaler(scale=1024, interval=2),
                               "inject": (3, numpy.inf)},
    "nan_policy_skip": {"nan_policy": "skip", "nan_loss": 2},
    "nan_policy_skip_accum": {"nan_policy": "skip", "batch_size": 50, "accum_grad": 2, "nan_loss": 4},
    "fp16_static_scale": {"dtype": "float16", "loss_scaler": lambda: LossScaler(128)},
    "fp16_dynamic_scale": {"dtype": "float16", "inject": (2, numpy.inf),
                           "loss_scaler": lambda: DynamicLossScaler(scale=256, interval=2)},
    "fp16_accum_grad_2": {"dtype": "float16", "batch_size": 50, "accum_grad": 2,
                          "loss_scaler": lambda: DynamicLossScaler(scale=64)},
    "parallel_one_replica": {"parallel": lambda n: {"devices": 1}},
    "parallel_every_gpu_device_store": {"parallel": lambda n: {"devices": n,
                                                               "kvstore": kvstores.create("device")}},
    "parallel_every_gpu_local_store": {"parallel": lambda n: {"devices": list(range(n)),
                                                              "kvstore": kvstores.create("local")},
                                       "accum_grad": 2, "batch_size": 50},
}


def run(device: str, name: str) -> dict:
    """Parameters after each update, the last loss and the loss scale, on the host."""
    s = dict(SCENARIOS[name])
    dtype = s.pop("dtype", "float32")
    b = backend(device, seed=3, dtype=dtype)
    model = MLP(DATA.in_size, DATA.out_size, b, hidden_sizes=[32, 32], dtype=dtype)
    iterator = SerialIterator(DATA.train, s.pop("batch_size", 100), rng=numpy.random.default_rng(7))
    kind = s.pop("optimizer", "sgd")
    args = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3} if kind == "sgd" else {"learning_rate": 0.01}
    opt = optimizers.create(kind, multi_precision=dtype == "float16", **args)
    scaler = s.pop("loss_scaler", lambda: None)()
    kwargs = {"backend": b, "loss_scaler": scaler, **s}
    if "inject" in kwargs:
        kwargs["callbacks"] = {"backward_on_finish": Inject(model, *kwargs.pop("inject"))}
    if "nan_loss" in kwargs:
        kwargs["loss_func"] = NanLoss(model, kwargs.pop("nan_loss"), kwargs.get("accum_grad", 1))
    parallel = kwargs.pop("parallel", None)
    if parallel is None:
        updater = updater_of(StandardUpdater, iterator, opt, model, **kwargs)
    else:
        updater = updater_of(ParallelUpdater, iterator, opt, model, **parallel(gpu_count(device)),
                             **kwargs)
    seen = []
    try:
        for _ in range(UPDATES):
            updater.update()
            seen.append({k: host(p.data) for k, p in model.params().items()})
        updater.settle()  # the host's loss scale and counts, exact (see updaters.device_verdict)
        loss = numpy.float64(float(as_data(updater.observation["loss"])))
    finally:
        updater.finalize()
    return {"params": seen, "loss": loss, "scale": None if scaler is None else float(host(scaler.scale))}


def compare(device: str, name: str) -> None:
    got, expected = run(device, name), run("numpy", name)
    rtol, atol = FLOAT16 if SCENARIOS[name].get("dtype") == "float16" else FLOAT32
    for i, (a, b) in enumerate(zip(got["params"], expected["params"]), start=1):
        assert_close(a, b, rtol, atol, f"{name} after update {i}")
    assert_close(got["loss"], expected["loss"], rtol, atol, f"{name} loss")
    assert got["scale"] == expected["scale"]
    at = SCENARIOS[name].get("nan_loss", SCENARIOS[name].get("inject", (None,))[0])
    if at is not None:  # the update with a non-finite loss or gradient was not applied
        for k, w in got["params"][at].items():
            numpy.testing.assert_array_equal(w, got["params"][at - 1][k], err_msg=f"{name} {k}")
        assert not numpy.array_equal(got["params"][at + 1]["l1/W"], got["params"][at]["l1/W"])


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_updates_on_cupy_end_at_numpys_parameters(name):
    compare("cupy", name)


def float16_masters(device: str) -> None:
    b = backend(device, seed=3, dtype="float16")
    model = MLP(DATA.in_size, DATA.out_size, b, hidden_sizes=[16], dtype="float16")
    opt = optimizers.create("sgd", learning_rate=0.1, multi_precision=True)
    updater = updater_of(StandardUpdater, SerialIterator(DATA.train, 100, rng=numpy.random.default_rng(7)),
                         opt, model, backend=b, loss_scaler=DynamicLossScaler())
    for _ in range(3):
        updater.update()
    assert numpy.isfinite(float(as_data(updater.observation["loss"])))
    masters = updater.state_dict()["optimizer_states"]["main"]
    for index, p in enumerate(model.params().values()):
        assert isinstance(p.data, type(b.xp.empty(0))) and p.data.dtype == numpy.float16
        (master,) = masters[str(index)]
        assert master.dtype == numpy.float32
        numpy.testing.assert_array_equal(host(p.data), master.astype(numpy.float16))


@pytest.mark.gpu
def test_float16_training_on_cupy_keeps_float16_weights_and_float32_masters():
    float16_masters("cupy")
