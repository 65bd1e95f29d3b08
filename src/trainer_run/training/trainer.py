"""The training loop (Chainer's ``Trainer``): an updater, a stop trigger, extensions.

``run()`` calls ``updater.update()`` until the stop trigger fires. After each iteration
every extension whose trigger fires is called, in order of decreasing ``priority`` (then
registration order; the rule is in :mod:`~.extension`). The loop knows nothing about
models: the updater owns the iteration.

Observation: the Trainer owns :attr:`Trainer.observation`, what the current iteration
reported, and it is the only one extensions read (never the updater's). Each iteration it
starts as a copy of the updater's report (its ``observation``: the training step's metrics by
bare name, ``loss``, ``accuracy``); writers (:data:`~.extension.PRIORITY_WRITER`, the
evaluator) add theirs under a prefix ending in ``/`` (``val/loss``); editors and readers then
read it. So a key tells who reported it: :func:`from_update` (no ``/``: the training step),
and :func:`metric_name` is how logs and the config name it (``train/loss``, ``val/loss``).

Extensions are :class:`~trainer_run.training.extension.Extension` objects (a plain callable
is wrapped as one). ``elapsed_time`` carries over a resume. With a
:class:`~trainer_run.profiling.Profiler` as ``profiler`` (the updater's too), each
extension's call and finalize is charged to ``extensions/<name>``, the triggers to
``extensions``, from the moment ``elapsed_time`` starts counting. An extension ends the run after
the current iteration with ``request_stop(reason)`` (early stopping); ``stop_reason`` says
why a run ended: ``max_iterations`` or ``max_epochs`` (the stop trigger's ``reason``), ``max_time``, the
reason an extension gave, or the status when it did not complete (``interrupted``,
``diverged``, ``failed``).

Time limit (``max_time``, Lightning's; see :mod:`~.time_limit`): once this session's training
time (the wall clock since ``run()`` began; not carried over a resume) reaches it, the run
ends after the current iteration as completed, with ``stop_reason`` ``max_time``: the decision
is made right after the update, before the extensions, so that the iteration is evaluated,
logged and checkpointed as the last one of a run is. When the stop trigger ends the run at
the same iteration, its reason stands. Several processes end after the same iteration: the
updater's ``agree_to_finish`` shares each process's verdict with the others (with a
synchronous kvstore it travels with the next update's metrics, so they all end one iteration
later, as with a stop signal).

Preemption: while ``run()`` runs in the main thread, SIGINT (Ctrl-C) and SIGTERM ask the
loop to stop after the current iteration and its extensions (see
:mod:`~trainer_run.stop_signals`; a request made before ``run()``, while the
command was starting, counts too); the run then ends with status ``interrupted``
(extensions' ``finalize`` saves a checkpoint and the summary) and ``stop_signal`` holds
the signal number. A second signal aborts the process at once (exit status 128 +
signal), which atomic checkpoints make safe.

Several processes: the updater's ``agree_to_stop(signum)`` decides with its peers after
which iteration a signal stops them all (one process's signal stops every process after the
same iteration), and its ``abort(reason)`` is told when the run ends with an exception,
before the extensions finalize, so that the other processes stop at once instead of waiting
for this one (see :class:`~trainer_run.updaters.Updater`).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from dataclasses import dataclass

from trainer_run import stop_signals
from trainer_run.profiling import EXTENSION, NullProfiler
from trainer_run.training import time_limit

from ..errors import Diverged, UserCodeError
from .extension import PRIORITY_EDITOR, PRIORITY_READER, PRIORITY_WRITER, Extension, as_extension
from .triggers import Asked, IntervalTrigger

__all__ = ["PRIORITY_EDITOR", "PRIORITY_READER", "PRIORITY_WRITER", "Trainer", "from_update",
           "metric_name"]


def from_update(key: str) -> bool:
    """Whether ``key`` of :attr:`Trainer.observation` is the training step's (a bare name such
    as ``loss``) rather than a writer's (``val/loss``); see the module docstring."""
    return "/" not in key


def metric_name(key: str) -> str:
    """``key`` of :attr:`Trainer.observation` as logs and the config name it: ``train/<key>``
    for the training step's, the key itself for a writer's."""
    return f"train/{key}" if from_update(key) else key


def _does_nothing(extension) -> bool:
    """Whether calling ``extension`` does nothing (its class keeps the base's ``__call__``:
    it only initializes, finalizes or keeps state), so the loop never calls it."""
    return type(extension).__call__ is Extension.__call__


@dataclass
class _Entry:
    extension: Extension
    name: str
    trigger: object
    priority: int
    order: int
    stage: str = ""

    def __post_init__(self):
        self.stage = EXTENSION + self.name  # the profiler's stage of this extension


class Trainer:
    """Runs ``updater`` until ``stop_trigger(trainer)`` holds.

    Args:
        updater: e.g. :class:`~trainer_run.updaters.StandardUpdater`.
        stop_trigger: a callable ``trigger(trainer) -> bool``.
        out: the run directory extensions write into.
        profiler: a :class:`~trainer_run.profiling.Profiler` (None: no profiling).
        max_time: the training time of a session after which the run ends (seconds, or
            ``DD:HH:MM:SS``; None: no limit; see the module docstring).
    """

    def __init__(self, updater, stop_trigger, out=".", profiler=None, max_time=None):
        self.updater = updater
        self.profiler = profiler or NullProfiler()
        self.stop_trigger = stop_trigger
        self.out = out
        self.observation: dict = {}
        """What this iteration reported: the updater's metrics, then the writers' (see the
        module docstring)."""
        self.status = "created"
        self._entries: dict[str, _Entry] = {}
        self._elapsed_before = 0.0
        self._start = None
        self.stop_signal = None
        self._stop_request = None
        self.max_time = time_limit.seconds(max_time)
        self._session_start = None
        self._updating_s = 0.0

    def request_stop(self, reason: str) -> None:
        """Ends the run after the current iteration and its extensions, as completed, with
        ``reason`` as its :attr:`stop_reason`."""
        self._stop_request = reason

    @property
    def stop_requested(self) -> bool:
        """Whether an extension asked to end the run after this iteration."""
        return self._stop_request is not None

    @property
    def stop_reason(self) -> str:
        """Why the run ended (see the module docstring); the status while it has not."""
        if self.status != "completed":
            return self.status
        if self._stop_request is not None:
            return self._stop_request
        reason = getattr(self.stop_trigger, "reason", None)
        return reason(self) if reason is not None else "stop_trigger"

    @property
    def elapsed_time(self) -> float:
        """Seconds spent training, including time before a resume."""
        running = 0.0 if self._start is None else time.perf_counter() - self._start
        return self._elapsed_before + running

    @property
    def updating_time(self) -> float:
        """Seconds this session (this call of :meth:`run`) spent in ``updater.update()``: the
        training steps alone (reading the batch, forward, backward, the gradient exchange,
        the optimizer), not the extensions (evaluation, checkpoints, logging)."""
        return self._updating_s

    def extend(self, extension, name: str | None = None, trigger=None,
               priority: int | None = None) -> str:
        """Registers ``extension`` (an :class:`Extension`, or a callable wrapped as one); the
        arguments given override its own; trigger may be a trigger or ``(period, unit)``.

        Its name is ``name``, else the extension's own ``name``, else its class name (a plain
        function's is its ``__name__``, see :func:`~.extension.as_extension`). As in Chainer,
        a name already registered gets the suffix ``_1``, then ``_2``, ...: two functions ``f``
        are ``f`` and ``f_1``, in the order they were registered (the names key their states in
        a checkpoint). Returns the name it was registered under."""
        extension = as_extension(extension)
        base = name or extension.name or type(extension).__name__
        trigger = trigger if trigger is not None else extension.trigger
        if isinstance(trigger, tuple):
            trigger = IntervalTrigger(*trigger)
        priority = priority if priority is not None else extension.priority
        name, ordinal = base, 0
        while name in self._entries:
            ordinal += 1
            name = f"{base}_{ordinal}"
        self._entries[name] = _Entry(extension, name, trigger, priority, len(self._entries))
        return name

    def get_extension(self, name: str):
        return self._entries[name].extension

    def _ordered(self) -> list[_Entry]:
        return sorted(self._entries.values(), key=lambda e: (-e.priority, e.order))

    def run(self) -> None:
        """Trains until the stop trigger fires. A stop signal (see the module docstring) or a
        KeyboardInterrupt ends with status ``interrupted``, a :class:`~trainer_run.errors.Diverged`
        loss with ``diverged``, any other exception with ``failed``; the last two are re-raised."""
        os.makedirs(self.out, exist_ok=True)
        entries = self._ordered()
        for entry in entries:
            entry.extension.initialize(self)
        self._start = time.perf_counter()
        self._session_start = time.monotonic()
        self._updating_s = 0.0
        self.profiler.start()
        self.status = "running"
        self.stop_signal = None
        self._stop_request = None
        restore = stop_signals.handle()
        called = [(e, Asked(e.trigger)) for e in entries if not _does_nothing(e.extension)]
        call = self._call_profiled if self.profiler.enabled else self._call
        stop = Asked(self.stop_trigger)
        try:
            while (self._stop_request is None and not stop(self) and not self._signalled()):
                began = time.perf_counter()
                self.updater.update()
                self._updating_s += time.perf_counter() - began
                self.observation = dict(self.updater.observation)
                if self.max_time is not None and self._out_of_time():
                    self.request_stop(time_limit.REASON)
                call(called)
            self.updater.settle()
            self.status = "completed" if self.stop_signal is None else "interrupted"
        except KeyboardInterrupt:
            self.status = "interrupted"
        except Diverged as e:
            self.status = "diverged"
            self._abort(e)
            raise
        except BaseException as e:
            self.status = "failed"
            self._abort(e)
            raise
        finally:
            try:
                self._finalize(entries, pending=sys.exc_info()[1] is not None)
            finally:
                if self.status == "interrupted":
                    stop_signals.clear()
                restore()

    def _call(self, called: list) -> None:
        """Calls each extension whose trigger fires at this iteration, in order; a trigger is
        asked only where it can fire (:class:`~.triggers.Asked`)."""
        iteration = self.updater.iteration
        for entry, asked in called:
            if asked.always or ((iteration >= asked.due or self._stop_request is not None)
                                and asked.ask(self, iteration)):
                entry.extension(self)

    def _call_profiled(self, called: list) -> None:
        """:meth:`_call`, the triggers charged to ``extensions``, each call to its stage."""
        profiler, iteration = self.profiler, self.updater.iteration
        with profiler.stage("extensions"):
            for entry, asked in called:
                if asked.always or ((iteration >= asked.due or self._stop_request is not None)
                                    and asked.ask(self, iteration)):
                    with profiler.stage(entry.stage):
                        entry.extension(self)

    def _signalled(self) -> bool:
        """Whether a stop signal ends the run after this iteration. The updater's
        ``agree_to_stop`` decides with its other processes, so that they all stop after the
        same iteration; a process stopped by another's signal takes its number (SIGTERM when
        several differ)."""
        self.stop_signal = self.stop_signal or stop_signals.requested()
        agreed = self.updater.agree_to_stop(self.stop_signal)
        if agreed and self.stop_signal is None:
            self.stop_signal = agreed if agreed in stop_signals.handled() else signal.SIGTERM
        return bool(agreed)

    def _out_of_time(self) -> bool:
        """Whether ``max_time`` ends the run after this iteration: the processes agree
        (``agree_to_finish``) once one's session has trained that long; not when the stop
        trigger ends it here anyway."""
        reached = time.monotonic() - self._session_start >= self.max_time
        return self.updater.agree_to_finish(reached) and not self.stop_trigger(self)

    def _abort(self, error: BaseException) -> None:
        """Tells the updater's other processes (its ``abort``) that this one stops with
        ``error``, before the extensions finalize."""
        try:
            self.updater.abort(str(error) if isinstance(error, UserCodeError)
                               else f"{type(error).__name__}: {error}")
        except Exception:  # noqa: S110 - the error on its way out matters more
            pass

    def _finalize(self, entries, pending: bool) -> None:
        """Finalizes every extension and the updater, even when one of them fails (the run is
        then ``failed``); the first failure is raised afterwards unless an earlier error is
        already on its way out."""
        calls = [functools.partial(self._finalize_one, e) for e in entries]
        first = None
        for finalize in [*calls, self.updater.finalize]:
            try:
                finalize()
            except Exception as e:
                first = first or e
                if self.status in ("completed", "interrupted"):
                    self.status = "failed"  # later extensions (the summary) must not say otherwise
        if first is not None and not pending:
            raise first

    def _finalize_one(self, entry: _Entry) -> None:
        with self.profiler.stage(entry.stage):
            entry.extension.finalize(self)

    def state_dict(self) -> dict:
        states = {e.name: e.extension.state_dict() for e in self._entries.values()}
        extensions = {name: state for name, state in states.items() if state is not None}
        return {"elapsed_time": self.elapsed_time, "updater": self.updater.state_dict(),
                "extensions": extensions}

    def load_state_dict(self, state: dict) -> None:
        self._elapsed_before = float(state["elapsed_time"])
        self.updater.load_state_dict(state["updater"])
        for name, ext_state in state.get("extensions", {}).items():
            if name in self._entries:
                self._entries[name].extension.load_state_dict(ext_state)
