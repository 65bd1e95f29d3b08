"""Standard output and error that outlive their reader, and a run that outlives its terminal.

A run whose output goes into a pipe (``trainer-run ... | head``, ``2>&1 | head -1``, a ``tee``
or an ssh session that went away) or to a terminal that closed must not end because the
reader did: once a write or flush to stdout or stderr fails with a broken pipe (``EPIPE``) or,
on a terminal that hung up, an I/O error (``EIO``), that stream's file descriptor is pointed at
``os.devnull`` and training goes on, writing its checkpoints, logs and summary as usual. (Rich's
console would otherwise exit with status 1 at its first broken pipe, wherever the run is: before
training, with no run directory left, or in its middle, with no summary.)

Closing the terminal sends SIGHUP, whose default action ends the process at once, with no
final checkpoint nor summary. It is ignored from the command's first line (as ``nohup`` does):
the run trains on to its end, its later console output dropped. To stop a run, SIGINT or
SIGTERM (:mod:`trainer_run.stop_signals`).
"""

from __future__ import annotations

import errno
import os
import signal
import sys

GONE = (errno.EPIPE, errno.EIO)
"""What a write to a reader that went away fails with: a pipe's, a closed terminal's."""


class OutlivedStream:
    """``stream`` (a text stream on a file descriptor), whose writes and flushes go to
    ``os.devnull`` from the first failure of :data:`GONE` on; everything else is the stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            if e.errno not in GONE:
                raise
            self._let_go()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            if e.errno not in GONE:
                raise
            self._let_go()

    def _let_go(self) -> None:
        """Points the stream's descriptor at ``os.devnull``: what it still buffers, and all
        later output, is dropped there."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass  # nothing left to lose

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install() -> None:
    """Makes ``sys.stdout`` and ``sys.stderr`` outlive their reader, and the process its
    terminal (SIGHUP ignored); once per process."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, OutlivedStream):
            setattr(sys, name, OutlivedStream(stream))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
