"""Stop signals: SIGINT (Ctrl-C) and SIGTERM (preemption) as requests to stop.

The first stop signal is recorded, never raised: whoever owns the work reads
:func:`requested` at a moment where stopping is clean (the training loop after an
iteration, the command before training starts), so no request is lost inside code that
happens to be running, and no KeyboardInterrupt traceback is printed. A second signal
aborts the process at once with status 128 + the signal number (atomic checkpoints make
that safe).

The handlers are process-wide, as signals are: :func:`handle` installs them (in the main
thread only; elsewhere it does nothing) and returns a function that restores the previous
ones. A request stays pending until :func:`clear`, so one made before training starts is
seen by the training loop.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_requested: int | None = None


def handle() -> Callable[[], None]:
    """Records stop signals from now on; returns the function that restores the previous
    handlers (a no-op outside the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum in SIGNALS:
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
    _abort_now(signum)
