"""Preparing the next batches on background threads (``updater.prefetch``, ``dataset.workers``).

A :class:`Prefetcher` stands beside an iterator and a ``gather`` function that turns a batch's
dataset indices into arrays (the updater's: ``dataset.take`` of each replica's part, the
normalization and ``dataset.transforms`` included). While the caller trains on one batch,
background threads (one, or ``dataset.workers``) gather the next ``depth``, each thread a
batch at a time; the caller takes them in the iterator's order.

The iterator keeps its exact semantics: it is advanced on the caller's thread, one batch per
:meth:`Prefetcher.next`, so its position, epoch and ``state_dict`` are those of a run without
prefetching, and a checkpoint resumes the same way. To know the indices of batches not yet
drawn, a *lead* copy of the iterator (the same dataset, its own order and generator, its
state loaded from the iterator's ``state_dict``) runs ahead and the threads gather for it.
Each batch the iterator draws is compared with the oldest gathered one by its indices (and
its key, with ``dataset.transforms``): equal ones mean equal arrays (``gather`` depends on
nothing else, whichever thread runs it), so that batch is used; on any difference (the
iterator's state was loaded from a checkpoint, it was reset, ...) the gathered batches are
dropped, the batch is gathered on the caller's thread, and the lead is
copied again from the iterator. Batches are therefore always the iterator's, bit for bit.

An exception raised by ``gather`` on the thread is raised again by the :meth:`Prefetcher.next`
that reaches its batch, on the caller's thread.

When it pays: the thread runs while the caller does not need Python's interpreter lock, so it
hides a slow gather (a file larger than memory, page faults, a slow disk, a large
normalization) behind a step that spends its time in BLAS or waiting for a GPU. A gather of
data already in memory is quick, and handing batches between the threads can then cost more
than it hides; the default is 0 (no thread).
"""

from __future__ import annotations

import copy
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy

from ..errors import check, check_number

WORKERS_PER_CORE = 4
"""The most ``dataset.workers`` threads per core this process may run on."""


def cores() -> int:
    """The cores this process may run on (its affinity; else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this system
        return os.cpu_count() or 1


def checked_workers(value) -> int:
    """``dataset.workers``: an integer from 0 (no thread) to :data:`WORKERS_PER_CORE` times
    :func:`cores`; above, one line says the most there may be."""
    threads = check_number("dataset.workers", value, low=0, integer=True)
    most = WORKERS_PER_CORE * cores()
    check(threads <= most, f"dataset.workers={threads} is more than {WORKERS_PER_CORE} threads per "
          f"core of the {cores()} this process may use; choose at most {most} (0: batches are "
          "gathered in the training thread)")
    return threads


def workers_note(threads: int) -> str | None:
    """A ``note:`` line when ``threads`` (``dataset.workers``) are as many as the cores or
    more: they then compete with training for them, which often makes a run slower."""
    if not threads or threads < cores():
        return None
    count = cores()
    return (f"note: dataset.workers={threads} on {count} core{'s' * (count > 1)}: its threads "
            "compete with training for them and may slow it; try fewer, or 0")


class Prefetcher:
    """The batches of ``iterator``, each passed through ``gather``, with up to ``depth`` of
    them gathered ahead on one background thread (0: none; everything on the caller's
    thread).

    Args:
        iterator: an iterator with ``next_indices()``, ``state_dict()``,
            ``load_state_dict(state)`` and a ``dataset`` (a
            :class:`~trainer_run.data.SerialIterator`). Only :meth:`next` advances it.
        gather: a function of what ``draw`` returns alone (a batch's indices); it runs on the
            background thread concurrently with the caller, so it may only read shared data.
        depth: the number of batches gathered ahead, an integer >= 0.
        threads: the threads that gather them, each a batch at a time (``dataset.workers``);
            the batches come back in the iterator's order whichever finishes first.
        draw: advances an iterator by one batch and returns what names the batch: its
            indices (``next_indices``, the default), or a tuple of them and other values of
            the iterator's state (arrays or tuples of integers); two batches are the same when
            these are equal.
    """

    def __init__(self, iterator, gather: Callable, depth: int, draw: Callable | None = None,
                 threads: int = 1):
        self.iterator = iterator
        self.gather = gather
        self.draw = draw or next_indices
        self.threads = check_number("dataset.workers", threads, low=1, integer=True)
        self.depth = check_number("prefetch", depth, low=0, integer=True)
        self._queue: deque = deque()  # (drawn, future) of the lead's batches, oldest first
        self._lead = None             # None: to be copied from the iterator before use
        self._pool: ThreadPoolExecutor | None = None

    def next(self):
        """Advances the iterator by one batch and returns ``gather`` of its indices (gathered
        ahead when the lead foresaw them; else here). Raises ``StopIteration`` when the
        iterator does, and what ``gather`` raised for this batch."""
        drawn = self.draw(self.iterator)
        future = None
        if self._queue:
            ahead, future = self._queue.popleft()
            if not _same(ahead, drawn):
                future = None
        if future is None:
            self.reset()
        self._fill()
        return self.gather(drawn) if future is None else future.result()

    def reset(self) -> None:
        """Drops the batches gathered ahead (one being gathered finishes unused) and the lead;
        the next :meth:`next` copies the lead from the iterator again."""
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()
        self._lead = None

    def close(self) -> None:
        """Drops the batches gathered ahead and stops the thread (after the batch it is
        gathering, if any). A later :meth:`next` starts a new one."""
        self.reset()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _fill(self) -> None:
        """Queues the lead's next batches until ``depth`` are queued or the lead has none."""
        if self.depth == 0:
            return
        if self._lead is None:
            self._lead = lead_of(self.iterator)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="prefetch")
        while len(self._queue) < self.depth:
            try:
                drawn = self.draw(self._lead)
            except StopIteration:  # an iterator without repeat, at its end
                return
            self._queue.append((drawn, self._pool.submit(self.gather, drawn)))


def lead_of(iterator):
    """A copy of ``iterator`` over the same dataset (not copied) with its own order and
    generator, its state loaded from ``iterator.state_dict()``: it yields the batches the
    iterator will yield next, and advancing it leaves the iterator as it was."""
    lead = copy.deepcopy(iterator, {id(iterator.dataset): iterator.dataset})
    lead.load_state_dict(iterator.state_dict())
    return lead


def next_indices(iterator):
    """The indices of ``iterator``'s next batch, advancing it (a :class:`Prefetcher`'s default
    ``draw``)."""
    return iterator.next_indices()


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    return numpy.shape(a) == numpy.shape(b) and bool(numpy.array_equal(a, b))
