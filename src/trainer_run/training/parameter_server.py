"""The server rank of a ``dist_async`` run: it owns the weights and the optimizer.

``mpiexec -n N trainer-run kvstore=dist_async`` starts N processes from one config; the last
rank builds the same model and optimizer as the workers (with its scheduler and counters)
and, instead of training, serves: every push of a worker is one update of that key's flat
group, as :class:`~trainer_run.optimizers.GroupApplier` computes it, applied as it arrives.
Worker 0's weights and optimizer states replace the server's own before the first push (so a
resumed run continues from its checkpoint), and worker 0 fetches the states back for every
checkpoint. :meth:`ParameterServer.run` returns once every worker has closed the store.

A stop signal to the server, or to any worker, stops every worker after the same iteration
(see :mod:`trainer_run.kvstore.worker`): they save and close, and the server then returns
with status ``interrupted`` and the signal the workers stopped on; a second signal exits at
once. If a worker stops without closing, the
server stops after the kvstore's timeout (see :mod:`trainer_run.kvstore.dist`).
"""

from __future__ import annotations

import numpy

from trainer_run import stop_signals

from ..optimizers import GroupApplier
from ..params import ParamStore

__all__ = ["ParameterServer"]


class ParameterServer:
    """Serves ``kvstore`` (a ``dist_async`` store on its server rank) with ``optimizer``
    applied to flat groups laid out like ``model``'s parameters.

    Attributes:
        status: ``"ready"``, then ``"completed"``, ``"interrupted"`` (a signal came while
            serving) or ``"failed"``.
        stop_signal: the signal the workers stopped on before their end, or None.
        weights: after :meth:`run`, the final weights by key.
    """

    def __init__(self, kvstore, model, optimizer, backend=None):
        xp = backend.xp if backend is not None else numpy
        self.kvstore = kvstore
        self.applier = GroupApplier(optimizer, ParamStore(model.params(), xp))
        self.status = "ready"
        self.stop_signal = None
        self.weights: dict = {}

    def run(self) -> None:
        """Serves until every worker has closed the store."""
        restore = stop_signals.handle()
        try:
            self.weights = self.kvstore.run_server(self.applier, stop_signals.requested)
            self.stop_signal = self.kvstore.stop_signal
            self.status = "completed" if self.stop_signal is None else "interrupted"
        except BaseException:
            self.status = "failed"
            raise
        finally:
            restore()
