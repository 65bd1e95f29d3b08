"""How the dist kvstores wait for MPI (``trainer_run.kvstore.mpi.poll``), on a simulated clock:
a short spin, then sleeps that double up to a cap, so a waiting rank leaves its core to the
ranks it waits for; never a wait past its timeout."""

from __future__ import annotations

import pytest

from trainer_run.kvstore import mpi

CALL_S = 1e-6  # simulated cost of one call of the test


class Clock:
    """``time.monotonic`` and ``time.sleep`` of a simulated clock, recording the sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(mpi, "time", clock)
    return clock


def ready_at(clock, at: float):
    """A test that costs CALL_S of the clock and is true from time ``at`` on; its calls are
    counted in ``calls``."""
    calls = []

    def test():
        calls.append(clock.now)
        clock.now += CALL_S
        return clock.now > at

    return test, calls


def doubling(count: int) -> list:
    """The first ``count`` sleeps, by hand: 10 us, doubling, at most MAX_SLEEP_S."""
    out, delay = [], 1e-5
    for _ in range(count):
        out.append(delay)
        delay = min(2 * delay, mpi.MAX_SLEEP_S)
    return out


def test_ready_at_once_neither_spins_nor_sleeps(clock):
    test, calls = ready_at(clock, 0.0)
    assert mpi.poll(test, 1.0) is True
    assert len(calls) == 1 and clock.sleeps == []


def test_a_message_under_way_is_caught_by_the_spin(clock):
    test, calls = ready_at(clock, mpi.SPIN_S / 2)
    assert mpi.poll(test, 1.0) is True
    assert clock.sleeps == []
    assert len(calls) == pytest.approx(mpi.SPIN_S / 2 / CALL_S, abs=2)


def test_a_long_wait_sleeps_between_tests(clock):
    """A rank that waits 50 ms tests ~1,060 times, not ~50,000: after the spin, one test
    per sleep, the sleeps doubling from 10 us to MAX_SLEEP_S."""
    test, calls = ready_at(clock, 0.05)
    assert mpi.poll(test, None) is True
    spins = len(calls) - len(clock.sleeps)
    assert spins == pytest.approx(mpi.SPIN_S / CALL_S, abs=2)
    assert clock.sleeps == pytest.approx(doubling(len(clock.sleeps)))
    assert clock.sleeps[-1] == mpi.MAX_SLEEP_S
    assert clock.now - 0.05 <= mpi.MAX_SLEEP_S + 2 * CALL_S  # woke within one sleep of ready
    assert len(calls) < spins + 0.05 / mpi.MAX_SLEEP_S + 10


def test_a_wait_for_a_computing_rank_sleeps_almost_at_once(clock):
    test, calls = ready_at(clock, 0.05)
    assert mpi.poll(test, None, mpi.WAIT_SPIN_S) is True
    assert len(calls) - len(clock.sleeps) == pytest.approx(mpi.WAIT_SPIN_S / CALL_S, abs=2)
    assert clock.sleeps == pytest.approx(doubling(len(clock.sleeps)))


def test_gives_up_after_its_timeout(clock):
    test, calls = ready_at(clock, float("inf"))
    assert mpi.poll(test, 0.2) is False
    assert 0.2 <= clock.now <= 0.2 + mpi.MAX_SLEEP_S + 2 * CALL_S
    assert clock.sleeps == pytest.approx(doubling(len(clock.sleeps)))
