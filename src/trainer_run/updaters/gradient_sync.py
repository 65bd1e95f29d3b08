"""GradientSync: replicas and worker processes kept in step by a synchronous kvstore.

The store (``local``, ``device``, ``dist_sync`` or ``dist_device_sync``) sums the gradients
of every replica and worker into the main replica's, one key per flat gradient buffer (see
:class:`~.sync.KeyLayout`), and every process applies the optimizer to that same sum (MXNet's
``update_on_kvstore`` would have the store apply it: the numbers are the same). With
``num_workers`` n > 1 every worker draws the same global batch and computes its shard
(example j goes to worker j % n), weighted by its share of the global batch, so the summed
gradient is the global batch's; the parameters start from rank 0's, broadcast when the sync
is made. Each update's metrics then travel summed over the workers, with their votes to stop
(a signal) and to finish (a time limit).
"""

from __future__ import annotations

import numpy

from .. import host_reads
from .sync import KVStoreSync


class GradientSync(KVStoreSync):
    """Sums gradients through ``kvstore`` (a synchronous store) for the replicas of the
    updater it is connected to. Connecting it (:meth:`connect`) inits the gradient keys and,
    with several workers, overwrites the main parameter store's parameters with rank 0's."""

    def __init__(self, kvstore):
        super().__init__(kvstore)
        self._metrics_key_ready = False
        self._stop_vote = self._stop_agreed = 0  # signal numbers: this worker's, all workers' sum
        self._finish_vote = self._finish_agreed = 0  # this worker's (0 or 1), all workers' sum

    def connect(self, params, callbacks, optimizer, applier) -> None:
        super().connect(params, callbacks, optimizer, applier)
        for key, group in zip(self.keys.groups, params.groups):
            self.kvstore.init(key, group.grad)
        if self.num_workers > 1:
            for key, group in zip(self.keys.broadcasts, params.groups):
                self.kvstore.broadcast(key, group.data, out=group.data)

    def reduce(self, iteration: int, replicas: list) -> None:
        """Sums the gradients of every replica (``replicas``, the main one first) and worker
        into the main replica's, one key per flat buffer, between the comm callbacks."""
        with self.communication(iteration):
            for k, key in enumerate(self.keys.groups):
                self.kvstore.pushpull(key, [s.groups[k].grad for s in replicas],
                                      out=replicas[0].groups[k].grad)

    def global_metrics(self, metrics: dict) -> dict:
        """Metrics weighted by this worker's share of the global batch, summed over workers:
        the global batch's averages (one small extra message per update with several
        workers, which also carries their requests to stop and to finish, see
        :meth:`agree_to_stop` and :meth:`agree_to_finish`)."""
        if self.num_workers == 1:
            return metrics
        names = sorted(metrics)
        values = numpy.array([*host_reads.scalars([metrics[n] for n in names]), self._stop_vote,
                              self._finish_vote])
        if not self._metrics_key_ready:
            self.kvstore.init(self.keys.metrics, values)
            self._metrics_key_ready = True
        self.kvstore.pushpull(self.keys.metrics, [values], out=values)
        self._stop_agreed, self._finish_agreed = int(values[-2]), int(values[-1])
        return dict(zip(names, values[:-2]))

    def agree_to_stop(self, signum: int | None, iteration: int) -> int | None:
        """Workers must stop after the same iteration, so each request travels with the next
        update's metrics and every worker stops after that update, with its own signal or
        else the sum of the others' numbers. One worker stops when asked."""
        if self.num_workers == 1:
            return signum
        self._stop_vote = self._stop_vote or signum or 0
        return (signum or self._stop_agreed) if self._stop_agreed else None

    def agree_to_finish(self, asked: bool) -> bool:
        """As :meth:`agree_to_stop`: a worker's wish to end the run (its time limit reached)
        travels with the next update's metrics, and every worker ends after that update."""
        if self.num_workers == 1:
            return asked
        self._finish_vote = self._finish_vote or int(asked)
        return self._finish_agreed > 0
