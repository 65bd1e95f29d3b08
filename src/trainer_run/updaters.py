"""Updaters: one training iteration, with Chainer's ``StandardUpdater`` semantics.

An updater owns the iteration: it draws a batch from the ``'main'`` iterator, converts it,
runs the model forward and backward, and applies the ``'main'`` optimizer. Iterators,
optimizers and models may be given as dicts by name; a bare one is registered as
``'main'``. ``iteration`` counts completed updates; ``epoch`` and ``epoch_detail`` come from
the main iterator.

Each optimizer is applied through an :class:`~trainer_run.optimizers.IndexUpdater`
attached to the flat parameter store of the model of the same name, so the optimizer step
is one fused pass per parameter group.
"""

from __future__ import annotations

from typing import Callable

import numpy

from .autograd import as_data
from .converter import concat_examples, to_device
from .optimizers import Optimizer, get_updater
from .params import ParamStore


def _by_name(value, kind: str) -> dict:
    if isinstance(value, dict):
        if "main" not in value:
            raise KeyError(f"{kind} given by name must include 'main'")
        return dict(value)
    return {"main": value}


class StandardUpdater:
    """The default training step: batch -> converter -> model -> backward -> optimizer.

    Args:
        iterator: the training iterator, or a dict of iterators by name.
        optimizer: an :class:`~trainer_run.optimizers.Optimizer`, or a dict by name.
        model: the model each optimizer updates, or a dict keyed like ``optimizer``.
        converter: turns a list of examples into arrays on the device
            (``converter(batch, backend)``).
        backend: the :class:`~trainer_run.backend.Backend` (None: NumPy on the host).
        loss_func: called with the converted arrays instead of the main model.
    """

    def __init__(self, iterator, optimizer, model, converter: Callable = concat_examples,
                 backend=None, loss_func: Callable | None = None):
        self._iterators = _by_name(iterator, "iterators")
        self._optimizers: dict[str, Optimizer] = _by_name(optimizer, "optimizers")
        self._models = _by_name(model, "models")
        if set(self._models) != set(self._optimizers):
            raise KeyError("models and optimizers must have the same names")
        self.converter = converter
        self.backend = backend
        self.loss_func = loss_func
        self.iteration = 0
        self.observation: dict = {}
        xp = backend.xp if backend is not None else numpy
        self.stores = {name: ParamStore(m.params(), xp) for name, m in self._models.items()}
        self._param_updaters = {}
        for name, opt in self._optimizers.items():
            if backend is not None and opt.rng is None:
                opt.rng = backend.rng
            self._param_updaters[name] = get_updater(opt)
            self._param_updaters[name].attach(self.stores[name])

    # -- Chainer's interface ------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self._iterators["main"].epoch

    @property
    def epoch_detail(self) -> float:
        return self._iterators["main"].epoch_detail

    @property
    def previous_epoch_detail(self):
        return self._iterators["main"].previous_epoch_detail

    @property
    def is_new_epoch(self) -> bool:
        return self._iterators["main"].is_new_epoch

    def get_iterator(self, name: str):
        return self._iterators[name]

    def get_optimizer(self, name: str) -> Optimizer:
        return self._optimizers[name]

    def get_all_optimizers(self) -> dict:
        return dict(self._optimizers)

    def get_model(self, name: str = "main"):
        return self._models[name]

    def finalize(self) -> None:
        for iterator in self._iterators.values():
            iterator.finalize()

    def update(self) -> None:
        """Runs one iteration (:meth:`update_core`) and counts it."""
        self.update_core()
        self.iteration += 1

    def update_core(self) -> None:
        in_arrays = self.next_batch(self._iterators["main"])
        store = self.stores["main"]
        store.cleargrads()
        self.observation = self.forward_backward(in_arrays)
        store.finalize_grads()
        self._param_updaters["main"].step()

    # -- pieces subclasses reuse ------------------------------------------------------------
    def next_batch(self, iterator):
        """The next batch of ``iterator``, converted and on the device.

        With the default converter and a dataset that can ``take`` rows, the batch is
        gathered with one fancy index instead of stacking examples one by one; the
        result is the same.
        """
        dataset = iterator.dataset
        if self.converter is concat_examples and hasattr(dataset, "take"):
            return to_device(dataset.take(iterator.next_indices()), self.backend)
        return self.converter(iterator.next(), self.backend)

    def forward_backward(self, in_arrays) -> dict:
        """Runs the loss on ``in_arrays``, back-propagates, returns the observations."""
        loss_func = self.loss_func or self._models["main"]
        out = loss_func(*in_arrays) if isinstance(in_arrays, tuple) else (
            loss_func(**in_arrays) if isinstance(in_arrays, dict) else loss_func(in_arrays))
        metrics = dict(out) if isinstance(out, dict) else {"loss": out}
        loss = metrics["loss"]
        loss.backward()
        return {k: as_data(v) for k, v in metrics.items()}

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        to_numpy = self.backend.to_numpy if self.backend is not None else (lambda a: a)
        return {
            "iteration": self.iteration,
            "backend": self.backend.state_dict() if self.backend is not None else None,
            "iterators": {n: it.state_dict() for n, it in self._iterators.items()},
            "optimizers": {n: opt.state_dict() for n, opt in self._optimizers.items()},
            "optimizer_states": {n: u.state_dict(to_numpy) for n, u in self._param_updaters.items()},
            "models": {n: s.state_dict(to_numpy) for n, s in self.stores.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        asarray = self.backend.asarray if self.backend is not None else (lambda a: a)
        self.iteration = int(state["iteration"])
        if self.backend is not None and state.get("backend") is not None:
            self.backend.load_state_dict(state["backend"])
        for name, it in self._iterators.items():
            it.load_state_dict(state["iterators"][name])
        for name, store in self.stores.items():
            store.load_state_dict(state["models"][name], asarray)
        for name, opt in self._optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
            self._param_updaters[name].load_state_dict(state["optimizer_states"][name], asarray)
