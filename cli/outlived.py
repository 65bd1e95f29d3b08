"""Standard output that outlives its reader.

A run whose output goes into a pipe (``trainer-run ... | head``, a ``tee`` or an ssh session
that went away) must not end because the reader did: once a write or flush to stdout fails
with a broken pipe, the stream's file descriptor is pointed at ``os.devnull`` and training
goes on, writing its checkpoints, logs and summary as usual (Rich's console would otherwise
exit with status 1 in the middle of the run, leaving no summary).
"""

from __future__ import annotations

import os
import sys


class OutlivedStdout:
    """``stream`` (a text stream on a file descriptor), whose writes and flushes go to
    ``os.devnull`` from the first broken pipe on; everything else is the stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._let_go()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
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
        except (BrokenPipeError, ValueError):
            pass  # nothing left to lose

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install() -> None:
    """Makes ``sys.stdout`` outlive its reader (once per process)."""
    if not isinstance(sys.stdout, OutlivedStdout) and sys.stdout is not None:
        sys.stdout = OutlivedStdout(sys.stdout)
