"""Stop signals: SIGINT (Ctrl-C) and SIGTERM (preemption) as requests to stop; in a SLURM
job also SIGUSR1 and SIGUSR2, the signals that ask a job to stop and be requeued
(:data:`REQUEUE`, see :mod:`trainer_run.runner.slurm_requeue`).

The first stop signal is recorded, never raised: whoever owns the work reads
:func:`requested` at a moment where stopping is clean (the training loop after an
iteration, the command before training starts), so no request is lost inside code that
happens to be running, and no KeyboardInterrupt traceback is printed. A second signal
aborts the process at once with status 128 + the signal number (atomic checkpoints make
that safe); but not a second SIGTERM in a SLURM job, where preemption and ``scancel`` send
one to the job step and one to the job, and SLURM itself kills a run that has not ended
``KillWait`` seconds later.

The handlers are process-wide, as signals are: :func:`handle` installs them (in the main
thread only; elsewhere it does nothing) and returns a function that restores the previous
ones. A request stays pending until :func:`clear`, so one made before training starts is
seen by the training loop. The handler a signal had before this module first handled it
(submitit's, which requeues a job of a sweep) is kept: :func:`earlier`.

SIGHUP (the terminal closed) is no stop signal: the command ignores it and trains on
(``trainer_run.cli.outlived``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM)
REQUEUE = (signal.SIGUSR1, signal.SIGUSR2)
"""In a SLURM job: stop with a checkpoint, then requeue the job."""

_requested: int | None = None
_earlier: dict[int, object] = {}


def in_slurm_job() -> bool:
    """Whether this process runs in a SLURM job (``SLURM_JOB_ID`` is set)."""
    return "SLURM_JOB_ID" in os.environ


def handled() -> tuple[int, ...]:
    """The signals that ask to stop in this process: :data:`SIGNALS`, and :data:`REQUEUE` in a
    SLURM job."""
    return SIGNALS + REQUEUE if in_slurm_job() else SIGNALS


def earlier(signum: int):
    """The Python handler ``signum`` had before this module first handled it, or None (it had
    the default action, or was ignored)."""
    handler = _earlier.get(signum)
    return handler if callable(handler) else None


def handle() -> Callable[[], None]:
    """Records stop signals from now on; returns the function that restores the previous
    handlers (a no-op outside the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {signum: signal.getsignal(signum) for signum in handled()}
    for signum, handler in previous.items():
        if handler is not _on_signal:
            _earlier.setdefault(signum, handler)
        signal.signal(signum, _on_signal)

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


def requested() -> int | None:
    """The first stop signal received and not yet cleared, or None."""
    return _requested


def clear() -> None:
    """Forgets the pending request (the work it stopped has ended)."""
    global _requested
    _requested = None


def before_training(signum: int) -> str:
    """The one line for a stop signal that came before training started."""
    return (f"stopped by {signal.Signals(signum).name} before training started; nothing was "
            "trained")


def _abort_now(signum: int) -> None:
    """A second stop signal: exits at once with status 128 + ``signum``."""
    sys.stderr.write(f"\n{signal.Signals(signum).name} again: aborting now; the last complete "
                     "checkpoint is kept\n\x1b[?25h")
    sys.stderr.flush()
    os._exit(128 + signum)


def _on_signal(signum, frame) -> None:
    global _requested
    if _requested is None:
        _requested = signum
        return
    if signum == signal.SIGTERM and in_slurm_job():
        return  # SLURM signals a step and its job both; it sends SIGKILL after KillWait itself
    _abort_now(signum)
