"""``kvstore.compression``: 2-bit gradient compression from the command line (real subprocesses).

The default run trains Adam at learning rate 0.001, whose gradients are mostly far below the
default threshold of 0.5: sent only once their residuals add up to it, they train the spirals
to about 0.65 validation accuracy in 1000 iterations. A threshold of 0.01 reaches 0.9975 (0.001:
0.975, 0.05: 0.93, 0.1: 0.70), so the tests use it.
"""

import sys

import numpy
import pytest
from helpers import load_npz, one_error_line, read_jsonl, run_cli
from mpi_jobs import run

PARALLEL = ("updater=parallel", "updater.devices=2", "kvstore=device", "trainer.progress=false")
COMPRESSED = ("kvstore.compression.type=2bit", "kvstore.compression.threshold=0.01")


def _train(out, *args):
    result = run_cli(f"hydra.run.dir={out}", *args)
    assert result.returncode == 0, result.stderr
    return load_npz(out / "model.npz"), read_jsonl(out / "metrics.jsonl")[-1]




@pytest.fixture(scope="module")
def compressed_run(tmp_path_factory):
    """Two replicas in one process, their gradients compressed by the device store."""
    return _train(tmp_path_factory.mktemp("compressed") / "run", *PARALLEL, *COMPRESSED)


def test_two_replicas_train_with_compressed_gradients(compressed_run, tmp_path):
    model, last = compressed_run
    plain, plain_last = _train(tmp_path / "plain", *PARALLEL)
    assert last["iteration"] == 1000
    assert last["val/accuracy"] >= 0.95
    assert plain_last["val/accuracy"] >= 0.95
    assert max(float(numpy.abs(model[k] - plain[k]).max()) for k in model) > 0.1  # not the same run


@pytest.mark.mpi
def test_two_processes_compress_as_two_replicas_do(compressed_run, mpiexec, tmp_path):  # noqa: F811
    """Rank r computes the shard replica r computes (example j of the global batch of 50 goes to
    j % 2 either way) and compresses it with a residual of its own, so the ranks' run follows
    the replicas' (bit for bit on the machine the test was written on)."""
    code, out = run([mpiexec, "-n", "2", sys.executable, "-m", "trainer_run.cli", "kvstore=dist_sync",
                     "dataset.batch_size=25", "trainer.progress=false", *COMPRESSED,
                     f"hydra.run.dir={tmp_path / 'two'}"], timeout=120)
    assert code == 0, out
    two, last = load_npz(tmp_path / "two" / "model.npz"), read_jsonl(tmp_path / "two" / "metrics.jsonl")[-1]
    assert last["val/accuracy"] >= 0.95
    model, _ = compressed_run
    for k in model:
        numpy.testing.assert_allclose(two[k], model[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("args, message", [
    (("kvstore.compression.type=2bit",),
     "error: kvstore.compression.type=2bit compresses the gradients a kvstore sums, and this run has "
     "none: one replica in one process uses no kvstore (MXNet's rule); choose updater=parallel with "
     "updater.devices >= 2 and kvstore=device, a dist kvstore under mpiexec, or "
     "kvstore.compression.type=null"),
    (("updater=parallel", "kvstore.compression.type=1bit"),
     "error: kvstore.compression.type='1bit' is unknown; choose 2bit (MXNet 1.9's 2-bit gradient "
     "compression) or null (none)"),
    (("updater=parallel", "kvstore.compression.type=2bit", "kvstore.compression.threshold=0"),
     "error: kvstore.compression.threshold must be > 0 and finite as a float32 (MXNet stores a float), "
     "got 0"),
    (("updater=parallel", "kvstore.compression.type=2bit", "precision=fp16"),
     "error: kvstore.compression works on float32 gradients only (MXNet's 2-bit kernels read float32); "
     "this run computes in float16: choose precision=fp32 or kvstore.compression.type=null"),
    (("updater=parallel", "kvstore=local", "kvstore.compression.type=2bit"),
     "error: kvstore.compression.type is not a config key with kvstore=local; these kvstore options "
     "have it: "),
], ids=["one_replica", "1bit", "threshold", "fp16", "local"])
def test_compression_that_cannot_work_is_refused(tmp_path, args, message):
    line = one_error_line(run_cli(f"hydra.run.dir={tmp_path / 'run'}", *args))
    assert line.startswith(message), line


def test_a_resume_with_compression_warns_that_it_is_not_bit_identical(tmp_path):
    out = tmp_path / "run"
    _train(out, *PARALLEL, *COMPRESSED, "trainer.max_iterations=10", "trainer.checkpoint_interval=10")
    resumed = run_cli(f"resume={out}", "trainer.max_iterations=20")
    assert resumed.returncode == 0, resumed.stderr
    assert ("warning: gradient compression residuals are not in checkpoints (nor in MXNet's): they "
            "restart from zero" in resumed.stderr)
    assert read_jsonl(out / "metrics.jsonl")[-1]["iteration"] == 20
