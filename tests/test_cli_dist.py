"""``mpiexec -n 2 trainer-run kvstore=dist_sync``: two processes of batch b equal one process of
batch 2b, only rank 0 writes, and every rank resumes from rank 0's checkpoint."""

import sys

import numpy
import pytest
from conftest import load_npz, read_jsonl, run_cli
from test_kvstore_dist import mpiexec, run  # noqa: F401  (mpiexec is a fixture)

COMMON = ("optimizer=sgd", "optimizer.momentum=0.9", "trainer.progress=false", "trainer.log_interval=10",
          "trainer.eval_interval=10", "trainer.checkpoint_interval=10")


def trainer_run(mpiexec, n, *args):  # noqa: F811
    code, out = run([mpiexec, "-n", str(n), sys.executable, "-m", "trainer_run.cli", *COMMON, *args],
                    timeout=120)
    assert code == 0, out
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("updater", [(), ("updater=parallel", "updater.devices=2")],
                         ids=["standard", "parallel"])
def test_two_processes_of_batch_25_equal_one_process_of_batch_50(mpiexec, tmp_path, updater):  # noqa: F811
    """With updater=parallel each process also splits its shard over 2 replicas."""
    trainer_run(mpiexec, 2, "kvstore=dist_sync", "dataset.batch_size=25", "trainer.max_iterations=30",
                *updater, f"hydra.run.dir={tmp_path / 'two'}")
    single = run_cli(*COMMON, "dataset.batch_size=50", "trainer.max_iterations=30",
                     f"hydra.run.dir={tmp_path / 'one'}")
    assert single.returncode == 0, single.stderr
    two, one = load_npz(tmp_path / "two" / "model.npz"), load_npz(tmp_path / "one" / "model.npz")
    for k in one:
        numpy.testing.assert_allclose(two[k], one[k], rtol=1e-5, atol=1e-6, err_msg=k)
    rows_two = read_jsonl(tmp_path / "two" / "metrics.jsonl")
    rows_one = read_jsonl(tmp_path / "one" / "metrics.jsonl")
    assert [r["iteration"] for r in rows_two] == [10, 20, 30]  # one writer: no duplicated rows
    for a, b in zip(rows_two, rows_one):
        assert a["epoch"] == b["epoch"]
        assert a["train/loss"] == pytest.approx(b["train/loss"], rel=1e-5)  # the global batch's
        assert a["val/accuracy"] == pytest.approx(b["val/accuracy"], rel=1e-6)


@pytest.mark.mpi
def test_every_rank_resumes_from_rank_0s_checkpoint(mpiexec, tmp_path):  # noqa: F811
    common = ("kvstore=dist_sync", "dataset.batch_size=25")
    trainer_run(mpiexec, 2, *common, "trainer.max_iterations=30", f"hydra.run.dir={tmp_path / 'straight'}")
    trainer_run(mpiexec, 2, *common, "trainer.max_iterations=10", f"hydra.run.dir={tmp_path / 'cut'}")
    trainer_run(mpiexec, 2, f"resume={tmp_path / 'cut'}", "trainer.max_iterations=30")
    a, b = load_npz(tmp_path / "straight" / "model.npz"), load_npz(tmp_path / "cut" / "model.npz")
    for k in a:
        numpy.testing.assert_array_equal(a[k], b[k])
