"""BackgroundWrite: writes in order, one at a time, their errors raised on the loop's thread;
frozen: a state the loop goes on changing cannot reach a write in flight, each array copied once."""

from __future__ import annotations

import threading

import numpy
import pytest

from trainer_run.optimizers import create, get_updater
from trainer_run.params import Parameter, ParamStore
from trainer_run.storage.background_write import BackgroundWrite, frozen, host_copy
from trainer_run.storage.states import state_leaves


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


def _adam_on_a_store():
    """A ParamStore (two flat groups) with an Adam updater after one step: live buffers."""
    rng = numpy.random.default_rng(0)
    store = ParamStore({"W": Parameter(rng.normal(size=(3, 4)).astype(numpy.float32)),
                        "b": Parameter(numpy.zeros(3, numpy.float32), wd_mult=0.0)})
    updater = get_updater(create("adam"))
    updater.attach(store)
    for p in store:
        p.grad[...] = 1.0
    updater.step()
    return store, updater


def _live_buffers(store, updater) -> list:
    return [g.data for g in store.groups] + [a for s in updater.states.values() for a in state_leaves(s)]


def _arrays(tree) -> list:
    if isinstance(tree, dict):
        return [a for v in tree.values() for a in _arrays(v)]
    if isinstance(tree, (list, tuple)):
        return [a for v in tree for a in _arrays(v)]
    return [tree] if isinstance(tree, numpy.ndarray) else []


def test_a_params_and_optimizer_state_is_copied_once_and_training_on_cannot_change_it():
    store, updater = _adam_on_a_store()
    taken = {"models": store.state_dict(numpy.asarray), "states": updater.state_dict(numpy.asarray)}
    expected = [a.tolist() for a in _arrays(taken)]
    state = frozen(taken)
    arrays = _arrays(state)
    # one copy: frozen kept the state_dicts' copies as they were ...
    assert all(a is b for a, b in zip(arrays, _arrays(taken))) and len(arrays) == 2 + 2 * 2
    # ... and those copies are not the live buffers the loop goes on changing
    assert not any(numpy.shares_memory(a, live) for a in arrays for live in _live_buffers(store, updater))
    for p in store:
        p.grad[...] = -3.0
    updater.step()                   # the loop trains on after save returned
    for p in store:
        p.data[...] += 1
    assert [a.tolist() for a in arrays] == expected
    numpy.testing.assert_array_equal(state["models"]["W"], expected[0])


def test_host_copy_copies_a_host_array_once_and_takes_a_device_transfer_as_the_copy():
    live = numpy.arange(6.0)
    copy = host_copy(live[1:4])      # a view of a live buffer: copied
    assert not numpy.shares_memory(copy, live) and not copy.flags.writeable
    moved = []

    def to_numpy(array):             # as a device backend's transfer: a new host array
        moved.append(numpy.array(array))
        return moved[-1]

    transferred = host_copy(live, to_numpy)
    assert transferred is moved[0] and frozen(transferred) is transferred
    writable = numpy.arange(3.0)     # any other array (a buffer the loop may change) is copied
    assert frozen(writable) is not writable
