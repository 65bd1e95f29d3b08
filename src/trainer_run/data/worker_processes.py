"""Reading a dataset's rows in worker processes (``dataset.workers`` over a dataset whose
examples Python reads one by one).

A dataset that gathers a batch with one indexed read per array (an
:class:`~trainer_run.data.ArrayDataset`, memory-mapped files, the image sets: :func:`reads_rows`)
spends its time in NumPy, which releases Python's interpreter lock, so ``dataset.workers``
threads gather batches side by side. A dataset of the user's whose ``dataset[i]`` is Python
(decoding files, building arrays one example at a time) holds the lock while it reads, so the
threads would take turns: its rows are read in :class:`ReaderProcesses` instead, each batch
part in one process, and come back stacked. A part's arrays are those the training thread
would have made (the dataset's own ``take``, else its examples stacked by
:func:`~trainer_run.converter.concat_examples`), so the batches are bit for bit the same.

The processes are forked once, from the thread that makes the pool, before it reads anything:
they inherit the dataset as it is in memory (it need not be picklable) and read nothing but
it; a part's indices go to a process and its arrays come back through a pipe. An exception
raised by ``dataset[i]`` in a process is raised again in the training process. Only POSIX
systems fork, as only they run trainer-run.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, wait

import numpy

from ..converter import batch_of

_DATASET = None
"""The dataset a worker process reads (set when it starts)."""


def reads_rows(dataset) -> bool:
    """Whether ``dataset`` gathers a batch with one indexed read per array: through the
    wrappers that delegate their ``take`` (``wraps``: a subset, the normalization), it ends in
    a dataset of its own ``take``."""
    while getattr(dataset, "wraps", False):
        dataset = dataset.dataset
    return hasattr(dataset, "take")


class ReaderProcesses:
    """``processes`` processes forked now, each holding ``dataset``."""

    def __init__(self, dataset, processes: int):
        self._pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_hold, initargs=(dataset,))
        wait([self._pool.submit(_ready) for _ in range(processes)])  # every fork happens here

    def rows(self, indices) -> tuple:
        """The rows ``indices`` of the dataset, stacked (see the module docstring), read in one
        of the processes; what reading raised is raised here."""
        return self._pool.submit(_rows, numpy.asarray(indices)).result()

    def close(self) -> None:
        """Stops the processes (after the parts they are reading)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _hold(dataset) -> None:
    global _DATASET
    _DATASET = dataset


def _ready() -> bool:
    return True


def _rows(indices: numpy.ndarray):
    return batch_of(_DATASET, indices)
