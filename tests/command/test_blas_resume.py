"""Bit-for-bit resume whatever the machine's core count, from the command line: a run records
the BLAS thread count it used in its checkpoints, and ``resume=`` on a machine whose BLAS starts
with another count uses the recorded one, saying so in a line, unless the command names another
(then the line says the resume may drift)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy
import pytest
from helpers import load_npz

RUN = ("dataset=mnist_like", "dataset.size=2000", "model.hidden_sizes=[256,256]",
       "trainer.max_iterations=20", "trainer.checkpoint_interval=10", "trainer.eval_interval=10",
       "trainer.log_interval=10", "trainer.progress=false")
"""A model big enough that the BLAS splits its products (784 inputs, 256 hidden units)."""


HALF = "iter_00000010"


def _run(*arguments, threads: int) -> subprocess.CompletedProcess:
    """``trainer-run`` on a machine whose BLAS starts with ``threads`` threads."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli", *RUN, *map(str, arguments)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def _recorded(checkpoint_dir) -> int | None:
    state = json.loads((checkpoint_dir / "state.json").read_text())
    return state["trainer"]["updater"]["backend"]["blas_threads"]


def _same(a, b) -> bool:
    a, b = load_npz(a / "model.npz"), load_npz(b / "model.npz")
    return sorted(a) == sorted(b) and all(numpy.array_equal(a[k], b[k]) for k in a)


def _threads_change_products() -> bool:
    """Whether this machine's BLAS gives another float32 product with 1 thread than with 2,
    for the shapes of :data:`RUN`; asked in a fresh process, as the runs are (a process that
    ran other tests may hold its BLAS in another state)."""
    probe = (
        "import numpy\n"
        "from trainer_run import blas_threads\n"
        "rng = numpy.random.default_rng(0)\n"
        "x = rng.normal(size=(50, 784)).astype('float32')\n"
        "w = rng.normal(size=(784, 256)).astype('float32')\n"
        "products = []\n"
        "for count in (1, 2):\n"
        "    assert blas_threads.use(count) == count\n"
        "    products.append(x @ w)\n"
        "print(not numpy.array_equal(*products))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == "True"


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """20 iterations with 2 BLAS threads, straight (its checkpoint at 10 is the resumes' start)."""
    run = tmp_path_factory.mktemp("blas") / "straight"
    _run(f"hydra.run.dir={run}", threads=2)
    return run


def test_a_resume_on_a_machine_of_one_thread_matches_the_straight_run_bit_for_bit(straight, tmp_path):
    resumed = tmp_path / "resumed"
    done = _run(f"resume={straight / 'checkpoints' / HALF}", f"hydra.run.dir={resumed}", threads=1)
    assert _same(straight, resumed)
    assert "BLAS threads: 2, as the run recorded" in done.stdout.splitlines()
    assert "warning" not in done.stderr
    assert _recorded(straight / "checkpoints" / HALF) == 2
    assert _recorded(resumed / "checkpoints" / "iter_00000020") == 2


def test_a_resume_with_another_count_named_says_so_and_without_the_record_it_drifts(straight, tmp_path):
    """``backend.threads=1`` on the resume: the count a machine of one core would have used
    had the run not recorded its own. On this machine's OpenBLAS 1 and 2 threads round the
    model's products differently, so the resumed run is not the straight one."""
    resumed = tmp_path / "resumed"
    done = _run(f"resume={straight / 'checkpoints' / HALF}", f"hydra.run.dir={resumed}",
                "backend.threads=1", threads=1)
    assert ("BLAS threads: 1 (backend.threads), where the run recorded 2: from here it may "
            "differ in the last bits from the uninterrupted run") in done.stdout.splitlines()
    assert _recorded(resumed / "checkpoints" / "iter_00000020") == 1
    if _threads_change_products():
        assert not _same(straight, resumed)
    else:  # a BLAS whose products do not depend on its threads: the record still holds
        assert _same(straight, resumed)


def test_a_count_the_run_was_given_is_recorded_and_kept_by_a_resume(tmp_path):
    run = tmp_path / "run"
    first = _run(f"hydra.run.dir={run}", "backend.threads=1", "trainer.max_iterations=10", threads=2)
    assert "BLAS threads" not in first.stdout  # a new run says nothing of them
    assert _recorded(run / "checkpoints" / HALF) == 1
    done = _run(f"resume={run}", threads=2)
    assert "BLAS threads: 1, as the run recorded" in done.stdout.splitlines()
    assert _recorded(run / "checkpoints" / "iter_00000020") == 1
