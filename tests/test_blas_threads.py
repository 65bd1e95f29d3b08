"""Bit-for-bit resume whatever the machine's core count: NumPy's BLAS splits a matrix product
among its threads, and another count rounds the last bits otherwise. A run records the count
it used in its checkpoints (``backend.threads``: null keeps the BLAS's choice, a number sets
it), and ``resume=`` uses the recorded count, through OpenBLAS's own call, saying so in a line,
unless the command names another (then the line says the resume may drift)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy
import pytest
from helpers import load_npz

from trainer_run import blas_threads
from trainer_run.backend import Backend, get_backend

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


@pytest.fixture(autouse=True)
def blas_as_it_was():
    """Whatever a test sets, the BLAS of this process ends with the count it started with."""
    before = blas_threads.current()
    yield
    if before is not None:
        blas_threads.use(before)


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


# -- the backend and the BLAS, in this process ------------------------------------------------------
def test_the_blas_of_numpy_is_found_and_its_count_set_and_read_back():
    assert blas_threads.current() is not None, blas_threads.uncontrolled()
    for count in (1, 3, 2):
        assert blas_threads.use(count) == count and blas_threads.current() == count


def test_a_backend_records_the_count_in_use_and_a_resumed_one_takes_it_back():
    backend = Backend("numpy", threads=3)
    assert blas_threads.current() == 3 and backend.state_dict()["blas_threads"] == 3
    state = backend.state_dict()
    blas_threads.use(1)
    resumed = Backend("numpy")
    resumed.load_state_dict(state)
    assert blas_threads.current() == 3 and resumed.notes == ["BLAS threads: 3, as the run recorded"]


def test_a_backend_given_a_count_keeps_it_and_says_the_run_recorded_another():
    state = {**Backend("numpy").state_dict(), "blas_threads": 3}
    given = Backend("numpy", threads=1)
    given.load_state_dict(state)
    assert blas_threads.current() == 1
    assert given.notes == ["BLAS threads: 1 (backend.threads), where the run recorded 3: from here "
                           "it may differ in the last bits from the uninterrupted run"]


def test_a_state_from_before_the_count_was_recorded_changes_nothing():
    blas_threads.use(2)
    backend = Backend("numpy")
    backend.load_state_dict({"rng": backend.state_dict()["rng"]})
    assert blas_threads.current() == 2 and backend.notes == []


@pytest.mark.parametrize("recorded", [0, -1, True, "2", 2.0, 10 ** 9, [2]])
def test_a_recorded_count_that_is_no_count_is_damage(recorded):
    backend = Backend("numpy")
    with pytest.raises(ValueError, match=r"its backend's blas_threads is .*, not a number of threads"):
        backend.load_state_dict({**backend.state_dict(), "blas_threads": recorded})


def test_null_after_a_run_that_set_a_count_is_the_blas_own_choice_again():
    """In a sweep, jobs run one after another in one process."""
    start = blas_threads.current()
    get_backend("numpy", threads=start + 1)
    assert blas_threads.current() == start + 1
    get_backend("numpy", threads=None)
    assert blas_threads.current() == start


def test_a_blas_that_cannot_be_set_is_said_once_in_a_warning(monkeypatch):
    monkeypatch.setattr(blas_threads, "use", lambda count: None)
    monkeypatch.setattr(blas_threads, "current", lambda: None)
    uncontrolled = blas_threads.uncontrolled()
    assert uncontrolled.startswith("NumPy's BLAS (") and "OPENBLAS_NUM_THREADS" in uncontrolled
    given = Backend("numpy", threads=1)
    assert given.notes == [f"warning: backend.threads=1 cannot be applied: {uncontrolled}"]
    assert given.state_dict()["blas_threads"] is None
    resumed = Backend("numpy")
    resumed.load_state_dict({**resumed.state_dict(), "blas_threads": 2})
    assert resumed.notes == [f"warning: the run recorded 2 BLAS threads, and {uncontrolled}: this "
                             "resumed run may differ in the last bits from the uninterrupted one"]


def test_a_count_beyond_what_the_blas_takes_is_said_in_a_warning():
    """This OpenBLAS was built for at most 64 threads (its MAX_THREADS)."""
    backend = Backend("numpy", threads=4000)
    most = blas_threads.current()
    assert most < 4000
    [note] = backend.notes
    assert note.startswith("warning: backend.threads=4000 cannot be applied: NumPy's BLAS (")
    assert note.endswith(f") takes at most {most} threads, and uses {most}")
