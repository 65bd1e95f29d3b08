"""Batches: the next batch of an iterator, as this worker's shard split over the replicas and
converted onto their devices, gathered ahead of time on a background thread with ``prefetch``."""

from __future__ import annotations

from typing import Callable

from ..converter import concat_examples, to_device
from ..data.prefetch import Prefetcher
from ..errors import check, check_number


class Batches:
    """Draws batches for an updater. ``shard(indices)`` gives this worker's part of a global
    batch and the number of examples the update averages over (:meth:`.sync.Sync.shard`);
    ``converter`` turns examples into arrays on a device; ``prefetch`` (N > 0) gathers the
    next N batches on one background thread, which needs the default converter and an
    iterator with ``next_indices`` over a dataset with ``take`` (``main``, checked here)."""

    def __init__(self, shard: Callable, converter: Callable = concat_examples, prefetch: int = 0,
                 main=None):
        self.shard, self.converter = shard, converter
        self.prefetch = check_number("prefetch", prefetch, low=0, integer=True)
        check(not self.prefetch or (converter is concat_examples and hasattr(main, "next_indices")
                                    and hasattr(main.dataset, "take")),
              f"prefetch={prefetch} gathers batches with the dataset's take(indices) and the "
              "default converter; this run's iterator, dataset or converter has none, so set it "
              "to 0")
        self._prefetchers: dict = {}

    def next_parts(self, iterator, backends: list) -> tuple[list, int]:
        """This worker's shard of the next global batch split over ``backends`` Chainer's way
        (example ``j`` of the shard to part ``j % len(backends)``), each part converted onto
        its backend's device; and the number of examples the update averages over.

        With the default converter and a dataset that can ``take`` rows, each part is
        gathered with one fancy index instead of stacking examples one by one (ahead of
        time with ``prefetch``); the result is the same.
        """
        dataset, n = iterator.dataset, len(backends)
        if self.converter is concat_examples and hasattr(dataset, "take"):
            parts, size = self._gathered(iterator, n)
            return [to_device(part, b) for part, b in zip(parts, backends)], size
        shard, size = self.shard(iterator.next())
        return [self.converter(shard[j::n], b) for j, b in enumerate(backends)], size

    def _gathered(self, iterator, n: int) -> tuple[list, int]:
        dataset, shard_of = iterator.dataset, self.shard

        def gather(indices):
            shard, size = shard_of(indices)
            return [dataset.take(shard[j::n]) for j in range(n)], size

        if not self.prefetch:
            return gather(iterator.next_indices())
        key = (id(iterator), n)
        if key not in self._prefetchers:
            self._prefetchers[key] = Prefetcher(iterator, gather, self.prefetch)
        return self._prefetchers[key].next()

    def reset(self) -> None:
        """Drops what was gathered ahead (for the iterator's old position, after a resume)."""
        for prefetcher in self._prefetchers.values():
            prefetcher.reset()

    def close(self) -> None:
        """Stops the prefetch threads."""
        for prefetcher in self._prefetchers.values():
            prefetcher.close()
