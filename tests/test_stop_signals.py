"""Stop signals (src/trainer_run/stop_signals.py), in this process's main thread: ``handle()`` records the
first SIGINT or SIGTERM sent with ``os.kill`` (``requested``) until ``clear``, a second one aborts
with 128 + its number (``os._exit`` replaced here), a SLURM job adds SIGUSR1/SIGUSR2 and lets a
second SIGTERM pass, and the function ``handle`` returns puts the previous handlers back."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from trainer_run import stop_signals

ALL = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals are handled in the main thread only")


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    """No request pending, no SLURM job, no handler kept from earlier tests; this process's
    handlers as they were afterwards."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr(stop_signals, "_earlier", {})
    before = {s: signal.getsignal(s) for s in ALL}
    stop_signals.clear()
    yield
    stop_signals.clear()
    for s, handler in before.items():
        signal.signal(s, handler)


@pytest.fixture
def exits(monkeypatch):
    """The statuses ``os._exit`` was called with (it returns instead of ending the process)."""
    codes = []
    monkeypatch.setattr(stop_signals.os, "_exit", codes.append)
    return codes


def send(signum) -> None:
    """Sends ``signum`` to this process; Python runs its handler in this (the main) thread at the
    next bytecode boundary, before ``send`` returns."""
    os.kill(os.getpid(), signum)
    time.sleep(0.001)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_first_stop_signal_is_recorded_until_cleared(signum):
    restore = stop_signals.handle()
    try:
        assert stop_signals.requested() is None
        send(signum)
        assert stop_signals.requested() == signum
        assert stop_signals.requested() == signum       # reading does not clear it
        stop_signals.clear()
        assert stop_signals.requested() is None
    finally:
        restore()


def test_a_request_outlives_the_handlers_and_a_new_handle(exits):
    restore = stop_signals.handle()
    send(signal.SIGTERM)
    restore()
    assert stop_signals.requested() == signal.SIGTERM
    restore = stop_signals.handle()     # the training loop's, after the command's
    try:
        assert stop_signals.requested() == signal.SIGTERM
    finally:
        restore()
    assert exits == []


@pytest.mark.parametrize(("first", "second"), [(signal.SIGINT, signal.SIGINT),
                                               (signal.SIGTERM, signal.SIGINT),
                                               (signal.SIGINT, signal.SIGTERM)])
def test_a_second_stop_signal_aborts_with_128_plus_its_number(exits, capsys, first, second):
    restore = stop_signals.handle()
    try:
        send(first)
        send(second)
    finally:
        restore()
    assert exits == [128 + second]
    assert stop_signals.requested() == first
    name = signal.Signals(second).name
    assert capsys.readouterr().err == (f"\n{name} again: aborting now; the last complete checkpoint "
                                       "is kept\n\x1b[?25h")


def test_in_a_slurm_job_a_second_sigterm_passes_and_the_requeue_signals_stop(exits, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert stop_signals.handled() == (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1,
                                      signal.SIGUSR2)
    restore = stop_signals.handle()
    try:
        send(signal.SIGUSR1)
        assert stop_signals.requested() == signal.SIGUSR1
        send(signal.SIGTERM)            # scancel signals the step and the job: no abort
        assert exits == []
        send(signal.SIGUSR2)
        assert exits == [128 + signal.SIGUSR2]
    finally:
        restore()


def test_outside_a_slurm_job_only_sigint_and_sigterm_are_handled():
    assert stop_signals.handled() == (signal.SIGINT, signal.SIGTERM)
    usr1 = signal.getsignal(signal.SIGUSR1)
    restore = stop_signals.handle()
    try:
        assert signal.getsignal(signal.SIGUSR1) is usr1
    finally:
        restore()


def test_restore_puts_the_previous_handlers_back_and_earlier_keeps_the_first():
    seen = []

    def submitit_like(signum, frame):
        seen.append(signum)

    signal.signal(signal.SIGTERM, submitit_like)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    restore = stop_signals.handle()
    assert signal.getsignal(signal.SIGTERM) is not submitit_like
    assert stop_signals.earlier(signal.SIGTERM) is submitit_like
    assert stop_signals.earlier(signal.SIGINT) is None        # ignored: no Python handler
    inner = stop_signals.handle()       # handled twice: the first handler stays the earlier one
    inner()
    assert stop_signals.earlier(signal.SIGTERM) is submitit_like
    restore()
    assert signal.getsignal(signal.SIGTERM) is submitit_like
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    send(signal.SIGTERM)
    assert seen == [signal.SIGTERM]
    assert stop_signals.requested() is None
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    stop_signals.handle()()             # a later handle: the first handler is still the earlier
    assert stop_signals.earlier(signal.SIGTERM) is submitit_like


def test_handle_outside_the_main_thread_installs_nothing():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    done = []
    thread = threading.Thread(target=lambda: done.append(stop_signals.handle()))
    thread.start()
    thread.join()
    assert {s: signal.getsignal(s) for s in before} == before
    assert done[0]() is None            # its restore does nothing


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGINT, "SIGINT"),
                                              (signal.SIGTERM, "SIGTERM"),
                                              (signal.SIGUSR1, "SIGUSR1")])
def test_before_training_names_the_signal(signum, name):
    assert stop_signals.before_training(signum) == (
        f"stopped by {name} before training started; nothing was trained")
