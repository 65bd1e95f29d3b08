"""What the console commands other than ``trainer-run`` share (``trainer-report``,
``trainer-eval``): arguments parsed, the command run, its status the exit status, and Ctrl-C
one line with status 130. Only the standard library is imported here, so a Ctrl-C while a
command imports the rest is that line too."""

from __future__ import annotations

import argparse
import sys
from typing import Callable


def main(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int],
         argv: list[str] | None = None) -> None:
    """Parses ``argv`` (the command line's by default) with ``parser`` and exits with
    ``run(options)``; a KeyboardInterrupt exits with 130 after one ``error:`` line."""
    try:
        sys.exit(run(parser.parse_args(argv)))
    except KeyboardInterrupt:
        sys.stderr.write("error: stopped by SIGINT (Ctrl-C)\n")
        sys.exit(130)
