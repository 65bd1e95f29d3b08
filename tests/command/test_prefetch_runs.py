"""Prefetching batches (``updater.prefetch``) and dataset workers (``dataset.workers``) from
the command line: a run with prefetch, interrupted and resumed or in two processes, trains
exactly as one without; bad values are one line naming the key; one core gets a note."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli
from mpi_jobs import run

QUIET = "trainer.progress=false"


def test_the_command_names_dataset_prefetch(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "updater.prefetch=-2", QUIET)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: updater.prefetch must be >= 0, got -2"


RUN = ("optimizer=sgd", "optimizer.learning_rate=0.05", "optimizer.momentum=0.9",
       "trainer.log_interval=20", "trainer.eval_interval=20", "trainer.checkpoint_interval=60",
       "dataset.batch_size=48")  # 1,600 training examples: batches cross epoch boundaries


def train(out, *args):
    result = run_cli(f"hydra.run.dir={out}", *RUN, *args, QUIET)
    assert result.returncode == 0, result.stderr
    return out


def without_timing(rows):
    return [{k: v for k, v in r.items() if k not in ("elapsed_s", "time")} for r in rows]


def assert_same_training(out, reference):
    """Parameters bit for bit and every logged metric (the config differs: prefetch is in it)."""
    expected, actual = load_npz(reference / "model.npz"), load_npz(out / "model.npz")
    assert sorted(actual) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key, strict=True)
    assert (without_timing(read_jsonl(out / "metrics.jsonl"))
            == without_timing(read_jsonl(reference / "metrics.jsonl")))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """120 iterations (3.6 epochs) without prefetch."""
    return train(tmp_path_factory.mktemp("reference") / "run", "trainer.max_iterations=120")


def test_a_run_with_prefetch_trains_exactly_as_one_without(tmp_path, reference):
    out = train(tmp_path / "run", "trainer.max_iterations=120", "updater.prefetch=4")
    assert_same_training(out, reference)
    config = json.loads((out / "checkpoints" / "iter_00000120" / "state.json").read_text())["config"]
    assert config["updater"]["prefetch"] == 4


def test_a_run_interrupted_and_resumed_with_prefetch_equals_an_uninterrupted_one(tmp_path, reference):
    out = train(tmp_path / "run", "trainer.max_iterations=60", "updater.prefetch=4")
    result = run_cli(f"resume={out}", "trainer.max_iterations=120", QUIET)
    assert result.returncode == 0, result.stderr
    assert_same_training(out, reference)


@pytest.mark.mpi
@pytest.mark.slow
def test_dist_workers_train_bit_identically_with_prefetch(mpiexec, tmp_path):  # noqa: F811
    """Two processes (each its shard, on 2 replicas) with updater.prefetch=3 against the same
    job without."""
    outs = {}
    for prefetch in (0, 3):
        out = tmp_path / f"prefetch{prefetch}"
        code, log = run([mpiexec, "-n", "2", sys.executable, "-m", "trainer_run.cli", *RUN,
                         "kvstore=dist_sync", "updater=parallel", "updater.devices=2",
                         "trainer.max_iterations=40", f"updater.prefetch={prefetch}",
                         f"hydra.run.dir={out}", QUIET], timeout=120)
        assert code == 0, log
        outs[prefetch] = out
    assert_same_training(outs[3], outs[0])


def test_a_run_with_a_million_workers_is_refused_in_one_line_and_one_core_gets_the_note(tmp_path):
    import os
    import subprocess

    from helpers import one_error_line

    refused = run_cli(f"hydra.run.dir={tmp_path / 'many'}", "dataset.workers=1000000")
    assert one_error_line(refused).startswith("error: dataset.workers=1000000 is more than 4 "
                                              "threads per core of the ")
    assert not (tmp_path / "many").exists()
    one = min(os.sched_getaffinity(0))
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", f"hydra.run.dir={tmp_path / 'one'}",
                           "dataset.workers=1", "dataset.size=120", "trainer.max_iterations=2",
                           "trainer.progress=false"], capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: os.sched_setaffinity(0, {one}))
    assert done.returncode == 0, done.stderr
    assert ("note: dataset.workers=1 on 1 core: its threads compete with training for them and "
            "may slow it; try fewer, or 0") in done.stderr.splitlines()
