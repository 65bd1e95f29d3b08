"""ServerSync: a ``dist_async`` worker's side of the parameter server.

The server (:class:`~trainer_run.training.parameter_server.ParameterServer`) owns the weights and the
optimizer; a worker pushes its gradients and pulls the weights back, one key per flat
weight buffer (:class:`~.sync.KeyLayout`), and never applies the optimizer itself. Each push
is an update of its own, applied as it arrives, so a worker's update averages over its own
shard of the global batch and its metrics are its own; a stop signal to any process stops
every worker after the same iteration (:meth:`ServerSync.agree_to_stop`); a time limit ends
each worker by its own clock (:meth:`~.sync.Sync.agree_to_finish`), as each reaches an
iteration limit in its own time. The server is set
up lazily, before the first update (after a resume has loaded its state, as
Gluon's Trainer inits its kvstore lazily).
"""

from __future__ import annotations

from .sync import KVStoreSync


class ServerSync(KVStoreSync):
    """The ``dist_async`` worker side of ``kvstore``; once connected (:meth:`connect`), for
    the model whose main parameter store is ``params``, trained by ``optimizer`` whose states
    ``applier`` keeps (the local copies: they set up the server and are refreshed from it
    before a checkpoint); ``callbacks`` get the comm hooks."""

    updates_on_server = True

    def __init__(self, kvstore):
        super().__init__(kvstore)
        self.optimizer = self.applier = None
        self.started = False
        self._stop: tuple | None = None  # (signal, the iteration to stop after) once agreed

    def connect(self, params, callbacks, optimizer, applier) -> None:
        super().connect(params, callbacks, optimizer, applier)
        self.optimizer = optimizer
        self.applier = applier

    def shard(self, batch) -> tuple:
        """This worker's shard of the global batch (example ``j`` goes to worker
        ``j % num_workers``); an update averages over the shard's examples."""
        shard = batch[self.rank::self.num_workers]
        return shard, len(shard)

    def before_update(self, replicas: list) -> None:
        """Before the first update: one key per flat weight buffer, worker 0's weights and
        optimizer states (with its counters) go to the server, and every worker pulls the
        weights into every replica (``replicas``)."""
        if self.started:
            return
        kv, keys = self.kvstore, list(self.keys.groups)
        kv.init(keys, [g.data for g in replicas[0].groups])
        if self.rank == 0:
            kv.set_optimizer_states(self.applier.get_states(dump_optimizer=True))
        kv.barrier()
        kv.set_optimizer(self.optimizer)
        kv.pull(keys, out=[[s.groups[k].data for s in replicas] for k in range(len(keys))])
        self.started = True

    def push_pull(self, iteration: int, replicas: list, scale: float = 1.0) -> None:
        """One update, made by the server: the replicas' gradients (``replicas``; they carry a
        factor ``scale``, sent with them and divided out by the server's optimizer step as by
        every local one) are pushed, summed and applied there as they arrive, and the
        server's current weights are pulled into the main replica, one key at a time, between
        the comm callbacks. The local optimizer then follows the server's update count (for
        the learning rate it reports)."""
        with self.communication(iteration):
            for k, key in enumerate(self.keys.groups):
                grads = [s.groups[k].grad for s in replicas]
                self.kvstore.pushpull(key, grads, out=replicas[0].groups[k].data, scale=scale)
        if self.kvstore.num_update is not None:
            self.optimizer.follow(self.kvstore.num_update)

    def agree_to_stop(self, signum: int | None, iteration: int) -> int | None:
        """Once a process of the job has a stop signal (``signum``: this worker's; the
        server reports the others'), the workers agree on the iteration to stop after, the
        furthest any has finished, and each stops after it with its own signal or else the
        first one asked for. A worker behind trains on to it; if a worker had already
        finished, every worker goes on to its end."""
        if self._stop is None:
            asked = signum or self.kvstore.stop_signal
            if not asked or not self.started:  # asks after its first update, as dist_sync
                return None
            after = self.kvstore.stop_at(asked, iteration)
            self._stop = (asked, float("inf") if after is None else after)
        asked, after = self._stop
        return (signum or asked) if iteration >= after else None

    def fetch_optimizer_states(self) -> None:
        """The server's optimizer states and counters replace the local ones (the weights are
        this worker's last pull; pushes of other workers that reached the server in between
        are in the states only: asynchronous training has no common moment)."""
        if self.started:
            self.applier.set_states(self.kvstore.get_optimizer_states(dump_optimizer=True))
