"""Device-to-host reads of a real ``trainer-run``, iteration by iteration.

Every read the library makes goes through :mod:`trainer_run.host_reads`, which counts it. This
trains a run in this process as the command does (``trainer_run.train(<overrides>)`` into a
temporary folder) and
prints how many iterations read the device, apart from those that log a row, evaluate or save
a checkpoint, where the loop reads on purpose. On a GPU (``backend=cupy`` or ``auto``) every
read waits for the device; the number to look for is 0 reads between log rows.

    python benchmarks/sync_count.py                       # backend=auto, the MLP, 200 iterations
    python benchmarks/sync_count.py backend=cupy precision=fp16 updater.nan_policy=skip

Under ``nan_policy=skip`` or dynamic loss scaling each update reads its verdict one update
later (asynchronously, :class:`trainer_run.host_reads.Later`); those reads are counted too.
"""

from __future__ import annotations

import sys
import tempfile

import trainer_run
from trainer_run import host_reads
from trainer_run.training.extensions import LogReport
from trainer_run.updaters import StandardUpdater

DEFAULTS = ["backend=auto", "trainer.max_iterations=200", "trainer.log_interval=50",
            "trainer.eval_interval=100", "trainer.progress=false"]


def main(overrides: list[str]) -> None:
    starts: list[int] = []
    rows: set[int] = set()
    update, log = StandardUpdater.update, LogReport.__call__

    def counted_update(self):
        starts.append(host_reads.count())
        update(self)

    def noted_log(self, trainer):
        before = len(self.log)
        log(self, trainer)
        if len(self.log) > before:
            rows.add(trainer.updater.iteration)

    StandardUpdater.update, LogReport.__call__ = counted_update, noted_log
    with tempfile.TemporaryDirectory() as out:
        trainer_run.train([*DEFAULTS, *overrides], run_dir=out)
    starts.append(host_reads.count())
    reads = {i + 1: starts[i + 1] - starts[i] for i in range(len(starts) - 1)}
    quiet = {i: n for i, n in reads.items() if i not in rows}
    reading = {i: n for i, n in quiet.items() if n}
    print(f"iterations {len(reads)}, log rows {len(rows)}, reads at rows "
          f"{sum(reads[i] for i in rows if i in reads)}")
    print(f"reads between log rows: {sum(quiet.values())} in {len(reading)} of {len(quiet)} "
          f"iterations{'' if not reading else ' (first: iteration %d, %d reads)' % min(reading.items())}")


if __name__ == "__main__":
    main(sys.argv[1:])
