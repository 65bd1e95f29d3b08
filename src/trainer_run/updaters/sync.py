"""Keeping replicas and worker processes in step: what an updater asks of its kvstore.

An updater computes gradients and applies the optimizer; a sync object owns the kvstore, if
there is one, and everything that crosses it. There are three, chosen by the kvstore rules
(:mod:`trainer_run.kvstore.trainer_rules`; ``asynchronous`` is
:attr:`~trainer_run.kvstore.trainer_rules.Decision.asynchronous`):

- :class:`Sync`: no kvstore (one replica in one process): nothing to sum or exchange.
- :class:`~.gradient_sync.GradientSync`: a synchronous store (``local``, ``device``,
  ``dist_sync``, ``dist_device_sync``) sums the gradients of every replica and worker, and
  every process applies the optimizer to the same sum.
- :class:`~.server_sync.ServerSync`: ``dist_async``: a server applies the optimizer to each
  worker's push as it arrives, and the workers pull its weights.

Every worker draws the same global batch and computes its shard of it (:meth:`Sync.shard`);
the parameters and optimizer states of a run start from rank 0's.
"""

from __future__ import annotations

import contextlib


class KeyLayout:
    """The kvstore keys of a model whose parameters lie in ``groups`` flat buffers (the
    groups of a :class:`~trainer_run.params.ParamStore`), ``n`` of them:

    - :attr:`groups`, keys ``0 .. n-1``: one per flat buffer; group ``k``'s gradients
      (synchronous: the pushes of every replica and worker are summed and pulled back), or
      with ``dist_async`` its weights (the server's copy; a push of gradients updates it).
    - :attr:`broadcasts`, keys ``n .. 2n-1``: rank 0's parameters, broadcast to every worker
      once at the start (synchronous, several workers).
    - :attr:`metrics`, key ``2n``: each update's metrics and the workers' votes to stop and
      to finish (synchronous, several workers).
    """

    def __init__(self, groups: int):
        self.groups = range(groups)
        self.broadcasts = range(groups, 2 * groups)
        self.metrics = 2 * groups


class Sync:
    """No kvstore: one replica in one process, rank 0 of 1 worker; nothing to sum or
    exchange. Its methods are what an updater calls on every sync object, with what they do
    when there is nothing to keep in step."""

    kvstore = None
    rank = 0
    num_workers = 1
    updates_on_server = False
    """Whether the kvstore's server applies the optimizer (:meth:`ServerSync.push_pull
    <.server_sync.ServerSync.push_pull>`) instead of this process."""

    def connect(self, params, callbacks, optimizer, applier) -> None:
        """Joins the updater whose main replica's parameter store is ``params`` (a
        :class:`~trainer_run.params.ParamStore`), trained by ``optimizer`` through ``applier``
        (its :class:`~trainer_run.optimizers.IndexApplier`), with ``callbacks`` (whose comm
        hooks fire around every exchange); here nothing to join. The updater calls it once,
        when it is made."""

    def shard(self, batch) -> tuple:
        """This worker's shard of a global batch (example ``j`` goes to worker
        ``j % num_workers``) and the number of examples an update averages over: the global
        batch's, since the workers' gradients are summed."""
        return batch[self.rank::self.num_workers], len(batch)

    def before_update(self, replicas: list) -> None:
        """Called before every update with the replicas' parameter replicas (the main
        replica's first); nothing to do here."""

    def reduce(self, iteration: int, replicas: list) -> None:
        """Sums the gradients of every replica and worker into the main replica's
        (``replicas[0]``); nothing to sum here."""

    def global_metrics(self, metrics: dict) -> dict:
        """The update's metrics over every worker's examples; here this process's."""
        return metrics

    def agree_to_stop(self, signum: int | None, iteration: int) -> int | None:
        """The signal to stop for after ``iteration`` (just finished), or None to go on
        (``signum``: this process's stop signal, if it has one); one process stops when
        asked."""
        return signum

    def agree_to_finish(self, asked: bool) -> bool:
        """Whether the run ends (as completed) after this iteration, ``asked`` being this
        process's wish (its time limit reached); one process ends when it asks."""
        return asked

    def fetch_optimizer_states(self) -> None:
        """Brings the optimizer states up to date before they are saved; here they are."""

    def close(self) -> None:
        """Ends this worker's use of the kvstore at the end of the run."""

    def abort(self, reason: str) -> None:
        """The run is ending with an error: tells the other processes ``reason``."""


class KVStoreSync(Sync):
    """What the two kvstore modes share: the store ``kvstore`` (its rank and number of
    workers, closing and aborting), and once connected the keys of the model whose main
    parameter store is ``params``, and ``callbacks``, whose comm hooks fire around every
    exchange of gradients."""

    def __init__(self, kvstore):
        self.kvstore = kvstore
        self.keys: KeyLayout | None = None
        self.callbacks = None

    def connect(self, params, callbacks, optimizer, applier) -> None:
        self.keys = KeyLayout(len(params.groups))
        self.callbacks = callbacks

    @property
    def rank(self) -> int:
        return self.kvstore.rank

    @property
    def num_workers(self) -> int:
        return self.kvstore.num_workers

    @contextlib.contextmanager
    def communication(self, iteration: int):
        """Fires ``comm_on_start`` before the exchange it encloses, ``comm_on_finish`` after
        it (not when it fails)."""
        self.callbacks.fire("comm_on_start", iteration)
        yield
        self.callbacks.fire("comm_on_finish", iteration)

    def close(self) -> None:
        """Closes the store (``dist_async``: the server stops once every worker has closed)."""
        self.kvstore.close()

    def abort(self, reason: str) -> None:
        """The other processes stop at their next exchange instead of waiting for this one
        (see the kvstore's ``abort``)."""
        self.kvstore.abort(reason)


def workers_change(saved: int | None, now: int, batch_size: int) -> str | None:
    """What resuming a state saved by ``saved`` workers (None: unknown) with ``now`` workers
    drawing global batches of ``batch_size`` changes (the global batch each update draws), in
    one sentence; None when the numbers are equal or the saved one is unknown. Training goes
    on correctly: the iterator's position counts examples, and the parameters and optimizer
    states do not depend on the number of workers; but it is not the run that was saved."""
    if saved is None or saved == now:
        return None
    per_worker = batch_size // now
    return (f"the checkpoint was written by {saved} worker process(es), this run has {now}: "
            f"the global batch changes from {saved * per_worker} to {now * per_worker} "
            f"examples ({per_worker} per worker), so the resumed run is not the same run and "
            f"not bit-identical to one that went on with {saved}")
