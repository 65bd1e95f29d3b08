"""BackgroundWrite: at most one write running on a background thread while training goes on;
frozen: the state it writes, copied once from what the loop goes on changing.

:meth:`BackgroundWrite.submit` first waits for the write before it (so writes happen in order
and never overlap), raising that write's error if it failed, then starts the new one;
:meth:`wait` waits for the one in flight and raises its error. The write itself is what it
would be on the loop's thread (a checkpoint is still written atomically, checksummed and
durably), so a process killed mid-write leaves the previous checkpoint as the latest.

A state handed to a write is :func:`frozen` on the loop's thread: each array is copied
once, by the state_dict that makes it (:func:`host_copy`) or else by :func:`frozen`.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy


class BackgroundWrite:
    """One write at a time on a daemon thread; its error is raised by the next call."""

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write: Callable[[], None]) -> None:
        """Waits for the previous write (raising its error), then runs ``write()`` in the
        background."""
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as e:  # raised on the loop's thread by the next call
                self._error = e

        self._thread = threading.Thread(target=run, name="checkpoint-writer", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Waits for the write in flight, if any; raises its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def frozen(value):
    """``value`` (dicts, lists and tuples of arrays and plain values) with every NumPy array
    that the loop could still change copied: what the loop goes on changing in place cannot
    reach a write in flight. A read-only array owning its memory (what :func:`host_copy`
    makes) is taken as it is, so a state_dict's copies are not copied again."""
    if isinstance(value, numpy.ndarray):
        return value if _is_host_copy(value) else value.copy()
    if isinstance(value, dict):
        return {k: frozen(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(frozen(v) for v in value)
    return value


def host_copy(array, to_numpy: Callable = numpy.asarray) -> numpy.ndarray:
    """A host copy of ``array`` that nothing else references, read-only so that
    :func:`frozen` takes it without copying it again. ``to_numpy`` moves a device array to
    the host (as :meth:`~trainer_run.backend.Backend.to_numpy`: a new host array, or the
    array itself when it already is one); its new array is the copy."""
    host = to_numpy(array)
    if host is array or not host.flags.owndata:  # the live array, or a view of it
        host = numpy.array(host)
    host.flags.writeable = False
    return host


def _is_host_copy(array: numpy.ndarray) -> bool:
    return array.flags.owndata and not array.flags.writeable
