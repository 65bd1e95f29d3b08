"""Runs of the command with ``backend=cupy``: a run ends near the same run on NumPy; a run cut
and resumed ends bit-identical to the straight run; a GPU-trained run loads on the CPU
(``load_model``) and predicts what the GPU computes, and ``trainer-eval`` measures it as the
run did; adamax trains with a finite loss; the parallel updater runs on the GPUs present."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy
import pytest
from gpu_helpers import RENAME, backend, backend_arg
from helpers import load_npz, read_jsonl, run_cli

import trainer_run
from trainer_run import prediction
from trainer_run.autograd import as_data
from trainer_run.models import persistents_of

QUIET = ("trainer.progress=false",)
IMAGES = ("dataset=npz", "dataset.path=train.npz", "dataset.val_path=val.npz",
          "dataset.test_path=test.npz")
MODELS = {
    "mlp": ("model=mlp",),
    "cnn": (*IMAGES, "model=cnn", "model.channels=[4,8]", "model.ksize=3", "model.hidden=16"),
    "resnet": (*IMAGES, "model=resnet", "model.width=4"),
}
SGD = ("optimizer=sgd", "optimizer.learning_rate=0.05", "optimizer.momentum=0.9")
# 20 SGD steps: each gradient within ~1e-5 relative of NumPy's (test_gpu_models), and a
# difference in the weights feeds into the later gradients, so it grows with the steps.
RUN_RTOL, RUN_ATOL = 1e-3, 1e-4
# The same weights, one forward: float32 rounding of one model (test_gpu_models' deep).
PREDICT_RTOL, PREDICT_ATOL = 1e-4, 2e-5


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder with small image sets (1 x 8 x 8 bytes, 2 classes: which half is brighter)."""
    path = tmp_path_factory.mktemp("gpu_runs")
    rng = numpy.random.default_rng(5)
    x = rng.integers(0, 256, size=(500, 1, 8, 8), dtype=numpy.uint8)
    y = (x[:, 0, :4].mean(axis=(1, 2)) > x[:, 0, 4:].mean(axis=(1, 2))).astype(numpy.int64)
    for name, part in (("train", slice(0, 300)), ("val", slice(300, 400)), ("test", slice(400, 500))):
        numpy.savez(path / f"{name}.npz", x=x[part], y=y[part])
    return path


def train(folder, device: str, name: str, *args):
    """The run directory of ``trainer-run`` on ``device`` (``name``: its folder)."""
    done = run_cli(backend_arg(device), *QUIET, f"hydra.run.dir={name}", *args, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / name


def compare_with_numpy(folder, device: str, model: str) -> None:
    args = (*MODELS[model], *SGD, "trainer.max_iterations=20", "trainer.log_interval=5")
    got = train(folder, device, f"{model}_{device}_near", *args)
    expected = train(folder, "numpy", f"{model}_numpy_near", *args)
    a, b = load_npz(got / "model.npz"), load_npz(expected / "model.npz")
    assert a.keys() == b.keys()
    for k in a:
        numpy.testing.assert_allclose(a[k], b[k], rtol=RUN_RTOL, atol=RUN_ATOL, err_msg=k)
    losses = [[r["train/loss"] for r in read_jsonl(d / "metrics.jsonl")] for d in (got, expected)]
    numpy.testing.assert_allclose(*losses, rtol=RUN_RTOL)


@pytest.mark.gpu
@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_run_on_cupy_ends_near_the_same_run_on_numpy(folder, model):
    compare_with_numpy(folder, "cupy", model)


RESUMED = {
    "mlp_adam": (*MODELS["mlp"], "optimizer=adam"),
    "mlp_fp16_dynamic_accum": (*MODELS["mlp"], "precision=fp16", "loss_scale=dynamic",
                               "loss_scale.scale=32768", "loss_scale.interval=4",
                               "updater.accum_grad=2"),
    "cnn_sgd_static": (*MODELS["cnn"], *SGD, "loss_scale=static"),
    "resnet_parallel": (*MODELS["resnet"], "updater=parallel", "updater.devices=1"),
}


def resume_bit_identical(folder, device: str, case: str) -> None:
    common = (*RESUMED[case], "trainer.log_interval=5", "trainer.checkpoint_interval=10",
              "trainer.eval_interval=10")
    straight = train(folder, device, f"{case}_straight", *common, "trainer.max_iterations=20")
    cut = train(folder, device, f"{case}_cut", *common, "trainer.max_iterations=10")
    resumed = run_cli(f"resume={cut}", "trainer.max_iterations=20", *QUIET, cwd=folder)
    assert resumed.returncode == 0, resumed.stderr
    a, b = load_npz(straight / "model.npz"), load_npz(cut / "model.npz")
    assert a.keys() == b.keys()
    for k in a:
        numpy.testing.assert_array_equal(a[k], b[k], err_msg=k)
    rows = [[{k: v for k, v in r.items() if k not in ("elapsed_s", "time")}
             for r in read_jsonl(d / "metrics.jsonl")] for d in (straight, cut)]
    assert rows[0] == rows[1]


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(RESUMED))
def test_a_resumed_run_on_cupy_is_bit_identical_to_the_straight_run(folder, case):
    resume_bit_identical(folder, "cupy", case)


class OnDevice:
    """A loaded model moved to ``b``'s device, whose ``forward`` takes and gives host arrays."""

    def __init__(self, model, b):
        self.model, self.b = model, b
        for p in [*model.params().values(), *persistents_of(model).values()]:
            p.data = b.asarray(p.data)

    def forward(self, x):
        return self.b.to_numpy(as_data(self.model.forward(self.b.asarray(x))))


def predictions(folder, device: str, model: str) -> None:
    run = train(folder, device, f"{model}_{device}_trained", *MODELS[model], *SGD,
                "trainer.max_iterations=30", "trainer.eval_interval=30")
    with numpy.load(folder / "val.npz") as val:
        x, y = (val["x"], val["y"]) if model != "mlp" else (None, None)
    if x is None:  # the spirals' validation split is drawn by the run: any points will do
        x = numpy.random.default_rng(3).standard_normal((100, 2)).astype(numpy.float32)
    on_cpu = trainer_run.load_model(run, "last")
    cpu = on_cpu.predict(x)
    loaded = trainer_run.load_model(run, "last")
    gpu = prediction.predict(OnDevice(loaded.model, backend(device)), x, loaded.in_shape,
                             loaded.normalization, loaded.dtype, loaded.batch_size, loaded.raw_inputs)
    numpy.testing.assert_allclose(cpu, gpu, rtol=PREDICT_RTOL, atol=PREDICT_ATOL)
    if y is not None:  # the run measured val/accuracy on the GPU, with these weights
        summary = json.loads((run / "summary.json").read_text())
        assert (cpu.argmax(axis=1) == y).mean() == pytest.approx(summary["val/accuracy"])


@pytest.mark.gpu
@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_gpu_run_loads_on_the_cpu_and_predicts_what_the_gpu_computes(folder, model):
    predictions(folder, "cupy", model)


def evaluated(folder, device: str) -> None:
    run = train(folder, device, f"eval_{device}", *MODELS["cnn"], *SGD, "trainer.max_iterations=30",
                "trainer.eval_interval=10")
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", run.name], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(sorted((run / "eval").glob("*.json"))[-1].read_text())
    summary = json.loads((run / "summary.json").read_text())
    # the test split measured on the CPU, against the run's figure measured on the GPU
    assert record["metrics"]["test/loss"] == pytest.approx(summary["test/loss"], rel=1e-4)
    assert record["metrics"]["test/accuracy"] == pytest.approx(summary["test/accuracy"])


@pytest.mark.gpu
def test_trainer_eval_measures_a_gpu_run_as_the_run_did(folder):
    evaluated(folder, "cupy")


def adamax(folder, device: str) -> None:
    """Issue 37: adamax on CuPy gave a NaN loss at iteration 2 (a ReLU unit whose gradient is
    always 0). 30 iterations, every logged loss finite and near NumPy's."""
    args = ("optimizer=adamax", "model.hidden_sizes=[64,64]", "trainer.max_iterations=30",
            "trainer.log_interval=1")
    losses = [[r["train/loss"] for r in read_jsonl(train(folder, d, f"adamax_{d}", *args)
                                                   / "metrics.jsonl")] for d in (device, "numpy")]
    assert len(losses[0]) == 30 and numpy.isfinite(losses[0]).all()
    # adamax steps by lr * m / u, about lr whatever the gradient's size: an entry whose
    # gradient is near 0 moves by +-lr on a rounding difference, so the runs drift apart
    # faster than SGD's
    numpy.testing.assert_allclose(*losses, rtol=1e-2)


@pytest.mark.gpu
def test_adamax_on_cupy_trains_with_numpys_finite_losses(folder):
    adamax(folder, "cupy")


def visible_gpus(device: str) -> int:
    if RENAME.get(device, device) == "numpy":
        return 1
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


@pytest.mark.gpu
def test_the_parallel_updater_runs_on_every_gpu_present(folder):
    run = train(folder, "cupy", "parallel_all", "updater=parallel",
                f"updater.devices={visible_gpus('cupy')}", "trainer.max_iterations=10")
    assert numpy.isfinite([r["train/loss"] for r in read_jsonl(run / "metrics.jsonl")]).all()


@pytest.mark.gpu
def test_more_devices_than_gpus_is_one_line_naming_how_many_are_visible(folder):
    """Issue 37: updater.devices=2 on one GPU ended in a CUDARuntimeError traceback."""
    n = visible_gpus("cupy")
    refused = run_cli(backend_arg("cupy"), *QUIET, "hydra.run.dir=parallel_more", "updater=parallel",
                      f"updater.devices={n + 1}", "trainer.max_iterations=10", cwd=folder)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
        refused.stderr
    assert str(n) in lines[0]
