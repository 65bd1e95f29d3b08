"""StandardUpdater: one training iteration, with Chainer's ``StandardUpdater`` semantics,
nnabla's ``accum_grad`` and callbacks, and loss scaling.

An updater owns the iteration: it draws a batch from the ``'main'`` iterator, converts it,
runs the model forward and backward, and applies the ``'main'`` optimizer. Iterators,
optimizers and models may be given as dicts by name; a bare one is registered as
``'main'`` (:mod:`.named_parts`). Each optimizer is applied through an
:class:`~trainer_run.optimizers.IndexApplier` attached to the flat parameter store of the
model of the same name, so the optimizer step is one fused pass per parameter group. What
crosses a kvstore (summing gradients over replicas and worker processes, their metrics and
stop votes, the ``dist_async`` server) is the updater's sync object's (:mod:`.sync`).

Our rules, where the seeds differ:

- **Accumulation** (``accum_grad=k``): k batches are drawn, each run forward and
  backward, and their gradients summed with weights ``n_i / N`` (``n_i`` the batch's
  examples, ``N`` all k batches' examples) before one optimizer step. With losses that
  average over their batch, the update equals one update on the union batch, to float32
  rounding (nnabla sums the k gradients unweighted, i.e. k times the mean). Metrics are
  averaged the same way. ``iteration`` counts updates; the iterator's epoch counts
  examples, so an update with ``accum_grad=4`` and batch 25 moves the epoch as far as one
  with batch 100.
- **Loss scaling**: backward is seeded with ``scale * n_i / N`` instead of ``n_i / N``, and
  the optimizer's step is given ``rescale_grad / scale`` as its gradient factor (MXNet's
  AMP), so the update sees unscaled gradients in the optimizer's precision; dynamic scaling,
  skip and retry are :mod:`trainer_run.loss_scaling`'s. Weight decay is the optimizer's
  ``wd`` only (nnabla's updater adds its own ``weight_decay``).
- **Divergence** (Chainer's ``FailOnNonNumber``, on the loss) and **clipping by global norm**:
  the verdict on each update's complete gradients is :mod:`.verdict`'s, or with a
  ``deferred`` backend :mod:`.device_verdict`'s, on the device; readers :meth:`settle` it.
- **Callbacks**: :mod:`trainer_run.callbacks`. **Profiling**: the stages ``data``,
  ``forward``, ``backward``, ``communication`` and ``update``
  (:mod:`trainer_run.profiling`).
- **Prefetch** (``prefetch=N``): the next ``N`` batches' parts are gathered on a background
  thread (:mod:`trainer_run.data.prefetch`), the same batches and states as without; they
  are moved to the device here.
"""

from __future__ import annotations

from typing import Callable

import numpy

from trainer_run.profiling import NullProfiler

from ..callbacks import Callbacks
from ..module import persistents_of, set_mode
from ..optimizers import get_updater
from ..own_gradients import outputs
from ..params import ParamStore
from ..user_code import blame, check_loss
from .batches import Batches
from .divergence import NAN_POLICIES, NanPolicy
from .named_parts import NamedParts
from .sync import Sync, workers_change
from .verdict import Verdict
from .weighting import add_weighted, backward_seeded, examples_in

__all__ = ["NAN_POLICIES", "StandardUpdater"]


class StandardUpdater(NamedParts):
    """The default training step: batches -> converter -> model -> backward -> optimizer.

    ``StandardUpdater(iterator, optimizer, model)`` trains on NumPy with no kvstore, no loss
    scaling and no clipping, a NaN or infinite loss stopping the run, as Chainer's does.
    What else an update does is in its parts, each built beforehand (from plain values:
    :func:`.parts.parts_of`, or :func:`.parts.updater_of` for the whole updater):

    Args:
        iterator: the training iterator, or a dict of iterators by name.
        optimizer: an :class:`~trainer_run.optimizers.Optimizer`, or a dict by name. One that
            draws random numbers and has no generator gets the backend's (``set_rng``).
        model: the model each optimizer updates, or a dict keyed like ``optimizer``.
        batches: a :class:`~.batches.Batches`: the backend (``batches.backend``; None: NumPy
            on the host), the converter, ``accum_grad`` (batches whose gradients make one
            update), ``prefetch``, the training batches' transforms and ``dataset.workers``
            (None: ``Batches()``).
        verdict: a :class:`~.verdict.Verdict` (or :class:`~.device_verdict.DeviceVerdict`):
            the :class:`~.divergence.NanPolicy`, the loss scaler (``verdict.loss_scaler``) and
            clipping by global norm (None: ``Verdict(NanPolicy())``, stop on a non-finite loss).
        sync: the kvstore's exchange, a :class:`~.sync.Sync` (None: ``Sync()``, no kvstore),
            :class:`~.gradient_sync.GradientSync` or :class:`~.server_sync.ServerSync`.
        loss_func: called with the converted arrays instead of the main model.
        callbacks: a :class:`~trainer_run.callbacks.Callbacks` or a dict of hooks.
        profiler: a :class:`~trainer_run.profiling.Profiler` whose stages the updates mark
            (None: none).

    The updater connects ``batches``, ``verdict`` and ``sync`` to itself when it is made;
    each part serves one updater.

    A user's updater (``updater._target_``, a subclass) is called as this class is by the
    run: with ``iterator``, ``optimizer`` and ``model``, the parts ``batches``, ``verdict``
    and ``sync`` built from the config (``updater.accum_grad``, ``prefetch``,
    ``nan_policy``, ``max_skipped_in_a_row``, ``clip_global_norm``, ``loss_scale``,
    ``kvstore``, ``dataset.transforms`` and ``dataset.workers``), ``callbacks``
    (``updater.callbacks``) and ``profiler`` (``trainer.profile``'s, or None), and any other
    key of its ``updater`` section as a keyword argument of that name.
    """

    def __init__(self, iterator, optimizer, model, *, batches: Batches | None = None,
                 verdict: Verdict | None = None, sync: Sync | None = None,
                 loss_func: Callable | None = None, callbacks=None, profiler=None):
        self.profiler = profiler or NullProfiler()
        self.name_parts(iterator, optimizer, model)
        self.batches = batches if batches is not None else Batches()
        self.backend = backend = self.batches.backend
        self.accum_grad = self.batches.accum_grad
        self.verdict = verdict if verdict is not None else Verdict(NanPolicy())
        self.nan, self.loss_scaler = self.verdict.nan, self.verdict.loss_scaler
        self.loss_func = loss_func
        self.callbacks = callbacks if isinstance(callbacks, Callbacks) else Callbacks(callbacks)
        self.iteration = 0
        self.kept = False
        """Whether the last update's optimizer step was kept: a bool, or a 0-d boolean array
        on the device when the verdict is the device's (:mod:`.device_verdict`); False for a
        skipped step. Weight averages read it (:mod:`trainer_run.averaging`)."""
        self.saved_num_workers: int | None = None
        """``num_workers`` of the run that wrote the state last loaded (None: nothing loaded,
        or a checkpoint written before the count was saved)."""
        self.observation: dict = {}
        xp = backend.xp if backend is not None else numpy
        self.stores = {name: ParamStore(m.params(), xp, persistents_of(m))
                       for name, m in self._models.items()}
        self._appliers = {}
        for name, opt in self._optimizers.items():
            if backend is not None and opt.rng is None:
                opt.set_rng(backend.rng)
            self._appliers[name] = get_updater(opt)
            self._appliers[name].attach(self.stores[name])
        self.sync = sync if sync is not None else Sync()
        self.sync.connect(self.stores["main"], self.callbacks, self._optimizers["main"],
                          self._appliers["main"])
        self.verdict.connect(self._optimizers["main"])
        self.batches.connect(self.sync, self._iterators["main"])
        self.backends = [backend]
        self.replicas = [self._models["main"]]
        self.replica_stores = [self.stores["main"]]
        """The replicas of the main model (``replicas``), their backends and parameter stores (one
        here); ``_models`` are the models by name (Chainer's ``models``: ``main`` and any other)."""

    @property
    def kvstore(self):
        """The kvstore (None: none)."""
        return self.sync.kvstore

    @property
    def rank(self) -> int:
        """This worker process's rank (0 of 1 without a dist kvstore)."""
        return self.sync.rank

    @property
    def num_workers(self) -> int:
        """The number of worker processes (a ``dist_async`` server is none)."""
        return self.sync.num_workers

    def finalize(self) -> None:
        """Stops the prefetch thread, finalizes the iterators and closes the kvstore
        (``dist_async``: after every worker has closed it, the server stops)."""
        self.batches.close()
        for iterator in self._iterators.values():
            iterator.finalize()
        self.sync.close()

    def abort(self, reason: str) -> None:
        """The run is ending with an error: the other processes are told ``reason`` and stop
        at their next exchange instead of waiting for this one (see the kvstore's ``abort``)."""
        self.sync.abort(reason)

    def agree_to_stop(self, signum: int | None) -> int | None:
        """The signal to stop for after this iteration, or None to go on (``signum``: this
        process's stop signal, if it has one). One process stops when asked; synchronous
        and asynchronous workers agree to stop after the same iteration (see
        :meth:`.gradient_sync.GradientSync.agree_to_stop` and
        :meth:`.server_sync.ServerSync.agree_to_stop`)."""
        return self.sync.agree_to_stop(signum, self.iteration)

    def agree_to_finish(self, asked: bool) -> bool:
        """Whether the run ends after this iteration because a process asked (``asked``: this
        one's time limit is reached); see :meth:`.sync.Sync.agree_to_finish`."""
        return self.sync.agree_to_finish(asked)

    def readings(self) -> dict:
        """Current values worth showing beside the metrics (the loss scale, skipped steps)."""
        return self.verdict.readings()

    def params_finite(self) -> bool:
        """Whether every model's parameters are all finite (no NaN or inf)."""
        return all(store.params_finite() for store in self.stores.values())

    # -- one iteration ---------------------------------------------------------------------
    def update(self) -> None:
        """Runs one iteration (:meth:`update_core`) and counts it."""
        with self.profiler.stage("communication"):
            self.sync.before_update(self.replica_stores)
        self.update_core()
        self.iteration += 1

    def update_core(self) -> None:
        """Gradients of ``accum_grad`` batches, then one optimizer step unless the verdict on
        them (:class:`.verdict.Verdict`) skips it, retries it on new batches or stops."""
        i = self.iteration
        while True:
            scale = self.verdict.backward_scale()
            with self.silent_overflow():
                self.observation = self.compute_gradients(i, scale)
            with self.profiler.stage("update"):
                verdict, carried, applied = self.verdict(self.stores["main"],
                                                         self.observation["loss"], scale, i)
            if verdict != "retry":
                break
        self.kept = applied if verdict == "apply" and applied is not None else verdict == "apply"
        if verdict == "apply":
            with self.profiler.stage("update"):
                self.apply_update(i, carried, applied)

    def settle(self) -> None:
        """Reads what the updates left on the device since the last read (the verdicts on
        their losses and gradients, :mod:`.device_verdict`) and acts on it: the host's counts
        are then exact, and a run whose update was not finite stops here
        (:class:`~trainer_run.errors.Diverged`). Readers of the run's state (log rows,
        evaluations, checkpoints, the summary) call it first."""
        self.verdict.settle()

    def compute_gradients(self, iteration: int, scale: float = 1.0) -> dict:
        """Fills the main replica's gradients from ``accum_grad`` batches (times ``scale``),
        each split over the replicas and summed over replicas and workers, and returns the
        batches' metrics, averaged over their examples."""
        stage = self.profiler.stage
        with stage("data"):
            draws = [self.next_parts(self._iterators["main"], self.backends)
                     for _ in range(self.accum_grad)]
        total = sum(size for _, size in draws)
        with stage("backward"):
            for store in self.replica_stores:
                store.cleargrads()
        metrics: dict = {}
        for parts, _ in draws:
            weights = [examples_in(part) / total for part in parts]
            seeds = self.gradient_weights(weights)
            with stage("forward"):
                self.callbacks.fire("forward_on_start", iteration)
                outs = self.on_replicas(lambda r: self.forward(parts[r], self.replicas[r]))
                self.callbacks.fire("forward_on_finish", iteration)
            with stage("backward"):
                self.callbacks.fire("backward_on_start", iteration)
                self.on_replicas(lambda r: backward_seeded(outs[r]["loss"], scale * seeds[r]))
                self.callbacks.fire("backward_on_finish", iteration)
            with stage("forward"):
                for out, weight in zip(outs, weights):
                    add_weighted(metrics, self.gathered(out), weight)
        with stage("backward"):
            for store in self.replica_stores:
                store.finalize_grads()
        with stage("communication"):
            self.sync.reduce(iteration, self.replica_stores)
            return self.sync.global_metrics(metrics)

    def apply_update(self, iteration: int, scale: float = 1.0, applied=None) -> None:
        """One step of the main optimizer on gradients that carry a factor ``scale``: here,
        with ``rescale_grad / scale`` as the step's gradient factor, or with ``dist_async``
        on the server (:meth:`.server_sync.ServerSync.push_pull`). ``applied``: where the
        step is kept (a 0-d boolean on the device; None: everywhere)."""
        self.callbacks.fire("update_on_start", iteration)
        if self.sync.updates_on_server:
            with self.profiler.stage("communication"):
                self.sync.push_pull(iteration, self.replica_stores, scale)
        else:
            applier = self._appliers["main"]
            if applied is None:
                applier.step(scale)
            else:
                with applier.unless(applied):
                    applier.step(scale)
        self.callbacks.fire("update_on_finish", iteration)

    # -- pieces subclasses reuse ------------------------------------------------------------
    def on_replicas(self, fn: Callable) -> list:
        """``fn(r)`` for every replica ``r``: here the one, the main model."""
        return [fn(0)]

    def gradient_weights(self, shares: list[float]) -> list[float]:
        """The factors of the replicas' backward passes for one batch whose parts are
        ``shares`` of the update's examples: here the shares themselves (the update's
        gradient is that of the mean loss over all its examples)."""
        return shares

    def gathered(self, metrics: dict) -> dict:
        """A replica's metrics where they can be added up (here, where they are)."""
        return metrics

    def next_parts(self, iterator, backends: list) -> tuple[list, int]:
        """This worker's shard of ``iterator``'s next global batch split over ``backends``
        (see :meth:`.batches.Batches.next_parts`), and the number of examples the update
        averages over."""
        return self.batches.next_parts(iterator, backends)

    def forward(self, in_arrays, model=None) -> dict:
        """The loss function (``loss_func``, else ``model``, else the main model) on
        ``in_arrays``, as a dict with ``"loss"`` and any further metrics; the model in
        training mode (:func:`trainer_run.models.set_mode`); a model with its own gradients
        through :func:`trainer_run.own_gradients.outputs`. The call is the user's code
        (:func:`trainer_run.user_code.blame`, config key ``model``), and what it returns must
        hold the loss as a graph node (:func:`trainer_run.user_code.check_loss`)."""
        loss_func = self.loss_func or model or self._models["main"]
        set_mode(model or self._models["main"], True)
        with blame("model", loss_func):
            if isinstance(in_arrays, tuple):
                out = outputs(loss_func, in_arrays)
            elif isinstance(in_arrays, dict):
                out = loss_func(**in_arrays)
            else:
                out = loss_func(in_arrays)
        out = dict(out) if isinstance(out, dict) else {"loss": out}
        check_loss(loss_func, out.get("loss", out))
        return out

    def silent_overflow(self):
        """A context that silences NumPy's overflow warnings: the updater handles non-finite
        values itself (the loss scaler, or ``nan_policy``) and reports them in one message."""
        return numpy.errstate(over="ignore", invalid="ignore", divide="ignore")

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resume needs, as host arrays and plain data. With ``dist_async``
        the optimizer states and counters are the server's, fetched first (see
        :meth:`.server_sync.ServerSync.fetch_optimizer_states`)."""
        to_numpy = self.backend.to_numpy if self.backend is not None else (lambda a: a)
        self.sync.fetch_optimizer_states()
        return {
            "iteration": self.iteration,
            "backend": self.backend.state_dict() if self.backend is not None else None,
            "iterators": {n: it.state_dict() for n, it in self._iterators.items()},
            "optimizers": {n: opt.state_dict() for n, opt in self._optimizers.items()},
            "optimizer_states": {n: u.state_dict(to_numpy) for n, u in self._appliers.items()},
            "models": {n: s.state_dict(to_numpy) for n, s in self.stores.items()},
            "loss_scaler": self.loss_scaler.state_dict() if self.loss_scaler is not None else None,
            **self.nan.state_dict(),
            "num_workers": self.num_workers,
        }

    def load_state_dict(self, state: dict) -> None:
        asarray = self.backend.asarray if self.backend is not None else (lambda a: a)
        self.iteration = int(state["iteration"])
        self.nan.load_state_dict(state)
        saved = state.get("num_workers")
        self.saved_num_workers = None if saved is None else int(saved)
        if self.backend is not None and state.get("backend") is not None:
            self.backend.load_state_dict(state["backend"])
        for name, it in self._iterators.items():
            it.load_state_dict(state["iterators"][name])
        self.batches.reset()
        for name, store in self.stores.items():
            store.load_state_dict(state["models"][name], asarray)
        for name, opt in self._optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
            self._appliers[name].load_state_dict(state["optimizer_states"][name], asarray)
        self.verdict.reset()
        if self.loss_scaler is not None:
            if state.get("loss_scaler") is None:
                raise ValueError("the saved state has no loss scaler; it was trained without one")
            self.loss_scaler.load_state_dict(state["loss_scaler"])

    def workers_change(self) -> str | None:
        """After :meth:`load_state_dict`: what resuming with another number of workers than
        the saved state's changes, in one sentence (see :func:`.sync.workers_change`); None
        when the numbers are equal or the saved one is unknown."""
        return workers_change(self.saved_num_workers, self.num_workers,
                              self._iterators["main"].batch_size)
