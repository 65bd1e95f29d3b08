"""What the console commands other than ``trainer-run`` share (``trainer-report``, ``trainer-generate``,
``trainer-eval``, ``trainer-export``): arguments parsed, the command run, its status the exit
status, Ctrl-C one line with status 130 (SIGTERM one line too, status 143), and a standard
output its reader closed (``| head -1``) never stopping the work: what is printed after the
reader left is dropped, the record or file is written all the same, and the status is the
command's. Only the standard library is imported here, so a Ctrl-C while a command imports the
rest is that line too."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Callable


def main(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int],
         argv: list[str] | None = None) -> None:
    """Parses ``argv`` (the command line's by default) with ``parser`` and exits with
    ``run(options)``; a KeyboardInterrupt exits with 130 after one ``error:`` line, SIGTERM
    with 143 after one such line; the standard output is :class:`ReaderMayLeave` meanwhile."""
    stdout = sys.stdout
    sys.stdout = ReaderMayLeave(stdout)
    before = signal.signal(signal.SIGTERM, _terminated)
    try:
        sys.exit(run(parser.parse_args(argv)))
    except Terminated:
        sys.stderr.write("error: stopped by SIGTERM\n")
        sys.exit(128 + signal.SIGTERM)
    except KeyboardInterrupt:
        sys.stderr.write("error: stopped by SIGINT (Ctrl-C)\n")
        sys.exit(130)
    finally:
        signal.signal(signal.SIGTERM, before)
        sys.stdout.flush()
        sys.stdout = stdout


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised where the command was, as Ctrl-C raises KeyboardInterrupt (of
    which it is one, so that what lets an interrupt through lets it through too)."""


def _terminated(signum, frame):
    raise Terminated


class ReaderMayLeave:
    """``stream`` (the standard output) whose reader may close the pipe (``| head -1``): from
    the write that finds it closed on, what is written goes nowhere (the descriptor is made
    ``/dev/null``, as Python's documentation of SIGPIPE advises, so no flush fails at exit
    either) and the command goes on with its work."""

    def __init__(self, stream):
        self._stream = stream
        self.left = False
        """Whether the reader has closed the pipe."""

    def write(self, text: str) -> int:
        if not self.left:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.left:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.left = True
        nowhere = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(nowhere, self._stream.fileno())
        finally:
            os.close(nowhere)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
