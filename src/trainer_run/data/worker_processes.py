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
raised by ``dataset[i]`` in a process is raised again in the training process: the user's
dataset's (a :class:`~trainer_run.errors.UserCodeError`, :class:`~.datasets.UserDataset`) with
the user's traceback as text (:class:`InWorker`, its cause). Only POSIX systems fork, as only
they run trainer-run.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy

from ..converter import batch_of
from ..errors import UserCodeError

OURS = Path(__file__).resolve().parents[1]
"""trainer-run's package: the frames of a traceback that are not the user's."""

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
        rows = self._pool.submit(_rows, numpy.asarray(indices)).result()
        if isinstance(rows, Failure):
            raise rows.error()
        return rows

    def close(self) -> None:
        """Stops the processes (after the parts they are reading)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _hold(dataset) -> None:
    global _DATASET
    _DATASET = dataset


def _ready() -> bool:
    return True


def _rows(indices: numpy.ndarray):
    try:
        return batch_of(_DATASET, indices)
    except UserCodeError as e:  # the user's dataset: its traceback comes back as text
        return Failure(str(e), e.key, e.name, _told(e.__cause__))


class InWorker(Exception):
    """What the user's code raised in a worker process: its traceback, as text."""


@dataclass
class Failure:
    """A :class:`~trainer_run.errors.UserCodeError` raised in a worker process, as it crosses
    back: its message, key and name, and the user's traceback (``told``; None without one)."""

    message: str
    key: str
    name: str
    told: str | None

    def error(self) -> UserCodeError:
        """The UserCodeError, whose cause is the user's traceback (:class:`InWorker`)."""
        error = UserCodeError(self.message, self.key, self.name)
        error.__cause__ = InWorker(self.told) if self.told else None
        return error


def _told(cause: BaseException | None) -> str | None:
    """``cause``'s traceback from its first frame outside trainer-run, as text."""
    if cause is None:
        return None
    tb = cause.__traceback__
    while tb is not None and tb.tb_next is not None and \
            Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(OURS):
        tb = tb.tb_next
    lines = traceback.format_exception(type(cause), cause, tb)
    return f"in worker process {os.getpid()}:\n" + "".join(lines).rstrip("\n")
