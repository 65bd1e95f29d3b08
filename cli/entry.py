"""The console script's entry point: stop signals are handled from its first line.

SIGINT and SIGTERM are recorded before the command imports anything heavy (see
:mod:`trainer_run.stop_signals`), so a Ctrl-C while the command starts exits with
one line and status 130 instead of a KeyboardInterrupt traceback, and is never lost.

Standard output and error outlive their reader, and the run its terminal (:mod:`.outlived`): a
run piped into ``head``, or whose terminal closed (SIGHUP), trains on.

A process of an ``mpiexec`` job ends through :func:`trainer_run.kvstore.mpi_job.ending`: at
exit it waits for the other ranks no longer than the kvstore's timeout, and every rank ends
with one status.
"""

import os
import sys


def main() -> None:
    try:
        from trainer_run import stop_signals
        from trainer_run.training import clock

        stop_signals.handle()
        clock.from_process_start()  # the command's process is its run: start-up counts
    except KeyboardInterrupt:  # before the handlers were in place
        sys.stderr.write("error: stopped by SIGINT before training started; nothing was trained\n")
        sys.stderr.flush()  # stop_signals.before_training's line: it may not be importable yet
        os._exit(130)  # nothing is written yet; the interpreter may not turn an interrupt into 130
    from . import outlived

    outlived.install()

    from trainer_run.kvstore import mpi_job

    from .main import main as run

    with mpi_job.ending():
        run()
