"""Bit-for-bit resume whatever the machine's core count: NumPy's BLAS splits a matrix product
among its threads, and another count rounds the last bits otherwise. A run records the count
it used in its checkpoints (``backend.threads``: null keeps the BLAS's choice, a number sets
it), and ``resume=`` uses the recorded count, through OpenBLAS's own call, saying so in a line,
unless the command names another (then the line says the resume may drift): the backend and
the BLAS in this process here, the resumes from the command line in
tests/command/test_blas_resume.py."""

from __future__ import annotations

import pytest

from trainer_run import blas_threads
from trainer_run.backend import Backend, get_backend


@pytest.fixture(autouse=True)
def blas_as_it_was():
    """Whatever a test sets, the BLAS of this process ends with the count it started with."""
    before = blas_threads.current()
    yield
    if before is not None:
        blas_threads.use(before)


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
