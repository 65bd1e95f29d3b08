"""The console script's entry point: stop signals are handled from its first line.

SIGINT and SIGTERM are recorded before the command imports anything heavy (see
:mod:`trainer_run.training.stop_signals`), so a Ctrl-C while the command starts exits with
one line and status 130 instead of a KeyboardInterrupt traceback, and is never lost.
"""

import sys


def main() -> None:
    try:
        from trainer_run.training import stop_signals

        stop_signals.handle()
    except KeyboardInterrupt:  # before the handlers were in place
        sys.stderr.write("error: stopped by SIGINT before training started; nothing was trained\n")
        sys.exit(130)
    from .main import main as run

    run()
