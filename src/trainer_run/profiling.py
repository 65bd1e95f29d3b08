"""Where a run's time goes: wall time per stage of the training loop (``trainer.profile``).

The updater marks its stages (``data``: drawing the next batch and moving it to the device;
``forward``; ``backward``; ``communication``: the kvstore's exchanges; ``update``: the
verdict on the gradients and the optimizer step) and the loop marks each extension's call
and finalize as ``extensions/<name>`` inside ``extensions``. Time is charged to the innermost
open stage only (a stage opened inside another pauses it), and time in no stage to
:data:`OTHER`, so the stages and ``other`` add up exactly to the time since :meth:`start`.

:class:`NullProfiler` is what runs without profiling: its ``stage`` is one shared context
that does nothing. On a GPU the profiler synchronizes the device at every stage boundary
(:func:`synchronizer`), so that a stage's time is its kernels' and not the next stage's.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

STAGES = ("data", "forward", "backward", "communication", "update", "extensions")
"""The stages of an iteration, in the order the report lists them."""
STARTUP = "start-up"
"""Time from the job's start (:attr:`Profiler.origin`) to the first iteration: the
interpreter, the imports, the data and the model being built."""
OTHER = "other"
"""Time inside the profiled window that no stage covers (the loop's own bookkeeping)."""
EXTENSION = "extensions/"
"""The prefix of one extension's stage: ``extensions/<name>``."""

_NOTHING = contextlib.nullcontext()


class NullProfiler:
    """Profiling off: every method does nothing and :meth:`stage` costs one call."""

    enabled = False

    def start(self) -> None:
        """Does nothing."""

    def stage(self, name: str):
        """A context that does nothing."""
        return _NOTHING


class _Stage:
    """The reusable context of one stage name of a :class:`Profiler`."""

    __slots__ = ("profiler", "name")

    def __init__(self, profiler: Profiler, name: str):
        self.profiler, self.name = profiler, name

    def __enter__(self):
        self.profiler.enter(self.name)

    def __exit__(self, *exc) -> None:
        self.profiler.leave()


class Profiler:
    """Accumulates ``clock()`` seconds per stage from :meth:`start` on.

    Args:
        clock: seconds as a float (``time.perf_counter``; tests give a fake one).
        synchronize: called at every stage boundary before the clock is read (a GPU's
            stream; None: nothing to wait for).
    """

    enabled = True

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 synchronize: Callable[[], None] | None = None):
        self.clock = clock
        self.synchronize = synchronize
        self.totals: dict[str, float] = {}
        """Seconds charged to each stage name (``extensions/<name>`` separately, ``other``)."""
        self.started: float | None = None
        self.origin: float | None = None
        """The ``clock()`` reading at which the job started, when known: :meth:`start` then
        charges the time since to :data:`STARTUP`, and the window opens there."""
        self._open: list[str] = []
        self._mark = 0.0
        self._contexts: dict[str, _Stage] = {}

    def start(self) -> None:
        """Opens the profiled window: time from now on is charged (and, with an
        :attr:`origin`, the time before it to :data:`STARTUP`)."""
        self.started = self._mark = self.clock()
        if self.origin is not None and self.origin < self.started:
            self.totals[STARTUP] = self.started - self.origin
            self.started = self.origin

    def stage(self, name: str) -> _Stage:
        """A context charging the time inside it to ``name`` (less any stage opened inside)."""
        context = self._contexts.get(name)
        if context is None:
            context = self._contexts[name] = _Stage(self, name)
        return context

    def enter(self, name: str) -> None:
        self._charge()
        self._open.append(name)

    def leave(self) -> None:
        self._charge()
        self._open.pop()

    def _charge(self) -> None:
        if self.started is None:
            return
        if self.synchronize is not None:
            self.synchronize()
        now = self.clock()
        name = self._open[-1] if self._open else OTHER
        self.totals[name] = self.totals.get(name, 0.0) + (now - self._mark)
        self._mark = now

    def elapsed(self) -> float:
        """Seconds since :meth:`start`, all of them charged (``other`` brought up to now)."""
        self._charge()
        return self._mark - self.started

    def by_stage(self) -> dict[str, float]:
        """Seconds of :data:`STARTUP` when charged, then per stage of :data:`STAGES`
        (``extensions`` with every ``extensions/<name>``), then ``other``; a stage that never
        ran has 0."""
        totals = {STARTUP: self.totals[STARTUP]} if STARTUP in self.totals else {}
        totals.update({name: self.totals.get(name, 0.0) for name in STAGES})
        totals["extensions"] += sum(self.extensions().values())
        totals[OTHER] = self.totals.get(OTHER, 0.0)
        return totals

    def extensions(self) -> dict[str, float]:
        """Seconds per extension (its calls and its finalize), by name."""
        return {name[len(EXTENSION):]: seconds for name, seconds in self.totals.items()
                if name.startswith(EXTENSION)}


def synchronizer(backend) -> Callable[[], None] | None:
    """What waits for ``backend``'s device at a stage boundary: its CUDA device's work, for
    CuPy; None for NumPy, whose calls return when their work is done."""
    return None if backend is None else backend.synchronizer()
