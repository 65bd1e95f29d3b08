"""Batches: the batches of each update (``accum_grad``), each drawn from an iterator as this
worker's shard split over the replicas and converted onto their devices, each part
transformed by ``dataset.transforms``, gathered ahead of time on background threads with
``prefetch`` or ``dataset.workers``."""

from __future__ import annotations

import contextlib
from typing import Callable

from ..converter import concat_examples, to_device
from ..data.augmentation import batch_key
from ..data.prefetch import Prefetcher
from ..data.worker_processes import ReaderProcesses, reads_rows
from ..errors import check, check_number
from .sync import Sync
from .weighting import batches_per_update


class Batches:
    """The batches of each update, drawn for an updater: ``accum_grad`` (>= 1) batches per
    update, each converted by ``converter`` onto ``backend``'s device (None: NumPy on the
    host); ``prefetch`` (N > 0) gathers the next N batches on one background thread, which
    needs the default converter and an iterator with ``next_indices`` over a dataset with
    ``take`` (``main``, checked by :meth:`connect`); ``transforms`` (an
    :class:`~trainer_run.data.augmentation.Augmentation`, or None) transforms each part with
    the draws of its key (the batch's :func:`batch_key` and the part's index), drawing the
    worker's generators; ``workers`` (N > 0, ``dataset.workers``) gathers and transforms
    batches on N threads, ``max(prefetch, 2 N)`` ahead, each thread's rows read in a process
    of its own when the dataset reads its examples one by one in Python
    (:mod:`trainer_run.data.worker_processes`); it needs the default converter and an
    iterator with ``next_indices``.

    Its updater connects it (:meth:`connect`) to the updater's sync object, which shards each
    global batch for this worker, and main iterator before the first batch is drawn."""

    def __init__(self, backend=None, converter: Callable = concat_examples, accum_grad: int = 1,
                 prefetch: int = 0, transforms=None, workers: int = 0):
        self.backend, self.converter, self.transforms = backend, converter, transforms
        self.accum_grad = batches_per_update(accum_grad)
        self.prefetch = check_number("prefetch", prefetch, low=0, integer=True)
        self.workers = check_number("dataset.workers", workers, low=0, integer=True)
        self.shard: Callable = Sync().shard
        self.augment = None
        self._prefetchers: dict = {}
        self._readers: ReaderProcesses | None = None

    def connect(self, sync, main) -> None:
        """Draws this worker's shard of each global batch (``sync.shard``, see
        :meth:`.sync.Sync.shard`; the transforms draw worker ``sync.rank``'s generators) from
        iterators like ``main``, the updater's main iterator; refuses ``prefetch`` and
        ``workers`` where ``main`` or the converter cannot gather ahead."""
        converter, prefetch, workers = self.converter, self.prefetch, self.workers
        check(not prefetch or (converter is concat_examples and hasattr(main, "next_indices")
                               and hasattr(main.dataset, "take")),
              f"prefetch={prefetch} gathers batches with the dataset's take(indices) and the "
              "default converter; this run's iterator, dataset or converter has none, so set it "
              "to 0")
        check(not workers or (converter is concat_examples and hasattr(main, "next_indices")),
              f"dataset.workers={workers} gathers batches with the default converter and the "
              "iterator's next_indices; this run's iterator or converter has none, so set it to 0")
        self.shard = sync.shard
        self.augment = None if self.transforms is None else self.transforms.for_worker(sync.rank)

    def next_parts(self, iterator, backends: list) -> tuple[list, int]:
        """This worker's shard of the next global batch split over ``backends`` Chainer's way
        (example ``j`` of the shard to part ``j % len(backends)``), each part transformed and
        converted onto its backend's device; and the number of examples the update averages
        over.

        With the default converter and a dataset that can ``take`` rows, each part is
        gathered with one fancy index instead of stacking examples one by one, and
        transformed where ``take`` put it (ahead of time with ``prefetch`` or ``workers``, in
        worker processes for a dataset without ``take``); the result is the same.
        """
        dataset, n = iterator.dataset, len(backends)
        if self.converter is concat_examples and (hasattr(dataset, "take") or self.workers):
            parts, size = self._gathered(iterator, n)
            return [to_device(part, b) for part, b in zip(parts, backends)], size
        key = batch_key(iterator) if self.augment is not None else None
        shard, size = self.shard(iterator.next())
        parts = [self.converter(shard[j::n], b) for j, b in enumerate(backends)]
        if self.augment is not None:
            parts = [self._augmented(part, b, key, j) for j, (part, b) in enumerate(zip(parts, backends))]
        return parts, size

    def _augmented(self, part, backend, key: tuple, j: int):
        with backend.activate() if backend is not None else contextlib.nullcontext():
            return self.augment(part, (*key, j))

    def _gathered(self, iterator, n: int) -> tuple[list, int]:
        shard_of, augment, rows = self.shard, self.augment, self._rows(iterator.dataset)

        def draw(it) -> tuple:
            """The key of ``it``'s next batch (None without transforms) and its indices."""
            return None if augment is None else batch_key(it), it.next_indices()

        def gather(drawn):
            key, indices = drawn
            shard, size = shard_of(indices)
            parts = [rows(shard[j::n]) for j in range(n)]
            if augment is not None:
                parts = [augment(part, (*key, j)) for j, part in enumerate(parts)]
            return parts, size

        if not self.prefetch and not self.workers:
            return gather(draw(iterator))
        key = (id(iterator), n)
        if key not in self._prefetchers:
            self._prefetchers[key] = Prefetcher(iterator, gather, max(self.prefetch, 2 * self.workers),
                                                draw=draw, threads=max(self.workers, 1))
        return self._prefetchers[key].next()

    def _rows(self, dataset):
        """The function that reads a part's rows: the dataset's ``take``, or with workers over
        a dataset that reads its examples in Python, one of their processes (started here, on
        the training thread, before any thread gathers)."""
        if not self.workers or reads_rows(dataset):
            return dataset.take
        if self._readers is None:
            self._readers = ReaderProcesses(dataset, self.workers)
        return self._readers.rows

    def reset(self) -> None:
        """Drops what was gathered ahead (for the iterator's old position, after a resume)."""
        for prefetcher in self._prefetchers.values():
            prefetcher.reset()

    def close(self) -> None:
        """Stops the prefetch threads and the worker processes."""
        for prefetcher in self._prefetchers.values():
            prefetcher.close()
        if self._readers is not None:
            self._readers.close()
            self._readers = None

