"""BackgroundWrite: writes in order, one at a time, their errors raised on the loop's thread;
frozen: a state the loop goes on changing cannot reach a write in flight."""

from __future__ import annotations

import threading

import numpy
import pytest

from trainer_run.background_write import BackgroundWrite, frozen


def test_writes_run_in_order_and_never_overlap():
    writer, log, running = BackgroundWrite(), [], threading.Lock()
    release = threading.Event()

    def write(n):
        def run():
            assert running.acquire(blocking=False), "two writes at once"
            if n == 0:
                release.wait(5)
            log.append(n)
            running.release()
        return run

    writer.submit(write(0))
    assert writer.busy
    threading.Timer(0.05, release.set).start()
    writer.submit(write(1))          # waits for write 0 first
    writer.submit(write(2))
    writer.wait()
    assert log == [0, 1, 2] and not writer.busy


def test_an_error_is_raised_by_the_next_call_once():
    writer = BackgroundWrite()

    def fail():
        raise OSError(28, "No space left on device")

    writer.submit(fail)
    with pytest.raises(OSError, match="No space left"):
        writer.submit(lambda: None)
    writer.wait()                    # the failed write's error was raised once; nothing is pending
    writer.submit(fail)
    with pytest.raises(OSError):
        writer.wait()


def test_frozen_copies_every_array_and_keeps_the_rest():
    params = numpy.arange(4.0)
    state = {"a": params, "b": [params[1:], 3, "x"], "c": (params, None)}
    copy = frozen(state)
    params += 10                     # the loop goes on training in place
    numpy.testing.assert_array_equal(copy["a"], [0, 1, 2, 3])
    numpy.testing.assert_array_equal(copy["b"][0], [1, 2, 3])
    assert copy["b"][1:] == [3, "x"] and copy["c"][1] is None and isinstance(copy["c"], tuple)
