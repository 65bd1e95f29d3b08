"""Averages of a model's parameters over training: the exponential moving average (Polyak's,
``trainer.ema_decay``) and the equal-weight average of stochastic weight averaging (SWA,
``trainer.swa``).

An :class:`Average` keeps one flat buffer per parameter group of the model's
:class:`~trainer_run.params.ParamStore`, on the parameters' device, in float32 (or the
parameters' own dtype when it is wider: float64 stays float64), and, for the equal-weight
average, the number of values it has taken in. Its rules:

- :meth:`Average.exponential`: ``avg = decay * avg + (1 - decay) * param``, the recursion as
  written (timm's ``ModelEmaV2``; PyTorch's ``get_ema_multi_avg_fn`` writes it as a lerp);
- :meth:`Average.equal`: PyTorch's ``AveragedModel`` default rule, ``avg = param`` for the
  first value, then ``avg += (param - avg) / (n + 1)`` with ``n`` the values averaged so far,
  so after ``n`` values ``avg`` is their mean.

Both take ``kept``, whether the update just made was kept (a skipped step, under
``nan_policy=skip`` or a loss scaler's overflow, changes no average), as a bool or a 0-d
boolean array on the device (:mod:`trainer_run.updaters.device_verdict`), then applied as a
mask. Only trained parameters are averaged: a model's persistent values (batch
normalization's running statistics) are the live model's, or recomputed
(:func:`trainer_run.bn_update.update_bn`).

The averages are checkpointed by parameter path as host float arrays with their counter
(:meth:`Average.state_dict`), under the state of the extension that keeps them
(:mod:`trainer_run.training.extensions.weight_average`). A metric measured with averaged
weights is named ``val/<kind>/<name>`` (:func:`prefix`): ``val/ema/accuracy``,
``test/swa/loss``.
"""

from __future__ import annotations

import contextlib

import numpy

from .backend import array_module
from .storage.background_write import host_copy

EMA = "ema"
"""The exponential moving average's name: its metrics' infix and its extension's name."""
SWA = "swa"
"""Stochastic weight averaging's name: its metrics' infix and its extension's name."""
CHOSEN = "chosen_by_objective"
"""In an EMA extension's checkpointed state: whether the run's objective ranks the EMA
weights, so that the run's ``best`` weights are the EMA's (see :func:`chosen_params`)."""


def prefix(split: str, kind: str) -> str:
    """The metric prefix of ``kind``'s (:data:`EMA`, :data:`SWA`) weights measured on
    ``split`` (``val``, ``test``): ``val/ema/``. It ends in ``/``, as an evaluator's must."""
    return f"{split}/{kind}/"


def ranks_ema(metric: str) -> bool:
    """Whether the objective ``metric`` is measured with the EMA weights (``val/ema/...``)."""
    return metric.startswith(prefix("val", EMA))


def _dtype(dtype) -> numpy.dtype:
    """The averages' dtype for parameters of ``dtype``: float32, or a wider float."""
    dtype = numpy.dtype(dtype)
    return dtype if dtype.kind == "f" and dtype.itemsize > 4 else numpy.dtype("float32")


class Average:
    """An average of ``store``'s parameters (a :class:`~trainer_run.params.ParamStore`); see
    the module docstring. :attr:`count` counts the values the equal-weight average took in
    (the exponential one needs no count, and keeps none: whether a device's verdict kept a step
    is known on the device alone); :attr:`started` says whether it holds values."""

    def __init__(self, store):
        self.store = store
        self.flats: list | None = None
        self.count = 0
        self._paths = {id(p): path for path, p in store.params.items()}

    def _by_path(self, flats) -> dict:
        """Each parameter's part of ``flats`` (laid out like the groups' buffers) by path."""
        return {self._paths[id(param)]: group.view(flat, k)
                for flat, group in zip(flats, self.store.groups)
                for k, param in enumerate(group.params)}

    @property
    def started(self) -> bool:
        return self.flats is not None

    def start(self) -> None:
        """Starts from the current parameters (count 0)."""
        self.flats = [array_module(g.data).array(g.data, dtype=_dtype(g.dtype))
                      for g in self.store.groups]
        self.count = 0

    def exponential(self, decay: float, kept=True) -> None:
        """One step of the exponential moving average with ``decay``, where ``kept``."""
        if kept is False:
            return
        for flat, group in zip(self.flats, self.store.groups):
            param = group.data.astype(flat.dtype, copy=False)
            if kept is True:
                flat *= decay
                flat += (1 - decay) * param
            else:
                array_module(flat).copyto(flat, decay * flat + (1 - decay) * param, where=kept)

    def equal(self) -> None:
        """Takes in the current parameters with the weight of every earlier value."""
        if not self.started or self.count == 0:
            self.start()
            self.count = 1
            return
        for flat, group in zip(self.flats, self.store.groups):
            flat += (group.data.astype(flat.dtype, copy=False) - flat) / (self.count + 1)
        self.count += 1

    def params(self, to_numpy) -> dict:
        """The averaged parameters by path, as host arrays of the parameters' dtypes."""
        dtypes = {path: p.data.dtype for path, p in self.store.params.items()}
        return {path: host_copy(view.astype(dtypes[path], copy=False), to_numpy)
                for path, view in self._by_path(self.flats).items()}

    def arrays(self, to_numpy) -> dict:
        """What a ``model.npz`` holds with these averages: the averaged parameters and the
        live model's persistent values, by path."""
        persistents = {n: host_copy(p.data, to_numpy) for n, p in self.store.persistents.items()}
        return {**self.params(to_numpy), **persistents}

    @contextlib.contextmanager
    def swapped_in(self):
        """Within this block the model's parameters are the averages (in their dtypes); after
        it, they and the persistent values are again exactly what they were (a block may
        change the persistent values: :func:`~trainer_run.bn_update.update_bn`)."""
        groups, persistents = self.store.groups, self.store.persistents.values()
        saved = [g.data.copy() for g in groups]
        saved_persistents = [p.data.copy() for p in persistents]
        try:
            for flat, group in zip(self.flats, groups):
                group.data[...] = flat.astype(group.dtype, copy=False)
            yield
        finally:
            for copy, group in zip(saved, groups):
                group.data[...] = copy
            for copy, p in zip(saved_persistents, persistents):
                p.data[...] = copy

    def state_dict(self, to_numpy) -> dict:
        """``count`` and the averages by parameter path (``params``, host arrays in the
        averages' dtype); ``params`` is None before :meth:`start`."""
        if not self.started:
            return {"count": self.count, "params": None}
        return {"count": self.count, "params": {path: host_copy(view, to_numpy) for path, view
                                                in self._by_path(self.flats).items()}}

    def load_state_dict(self, state: dict, asarray) -> None:
        """Takes back :meth:`state_dict`'s values (``asarray`` puts an array on the device)."""
        saved = state["params"]
        if saved is None:
            self.flats = None
        else:
            self.start()
            for path, view in self._by_path(self.flats).items():
                view[...] = asarray(saved[path])
        self.count = int(state["count"])


def chosen_average(ema) -> dict | None:
    """The averaged parameters by path in an EMA extension's saved state ``ema`` (its
    ``state_dict``; any value) when the run's objective ranked them (:data:`CHOSEN`), so
    that the run's best weights are these; else None (they are then the model's own)."""
    if not isinstance(ema, dict) or not ema.get(CHOSEN) or not isinstance(ema.get("params"), dict):
        return None
    return ema["params"]


def saved_problem(extensions: dict, config: dict, iteration: int, model: dict) -> str | None:
    """What makes the averages a run saved unable to be the run's, in words that start with
    the average's name (``ema/count is -1, ...``); None when nothing does. ``extensions``: the
    saved states of the trainer's extensions by name; ``config``: the saved config's
    ``trainer`` section; ``iteration``: the saved updater's; ``model``: the main model's saved
    arrays by path. Refused: an EMA or SWA state missing where the config has it on
    (``trainer.ema_decay``, ``trainer.swa.start``), a count that is not an integer from 0 to
    the iteration, an EMA decay outside [0, 1), averages that are not the model's parameters
    (by path and shape) or that hold a value that is not finite where the parameter holds
    none."""
    on = {EMA: config.get("ema_decay") is not None,
          SWA: (config.get("swa") or {}).get("start") is not None}
    for kind in (EMA, SWA):
        if kind not in extensions:
            if on[kind]:
                return (f"{kind} is missing, though its config has "
                        f"{'trainer.ema_decay' if kind == EMA else 'trainer.swa.start'} on")
            continue
        saved = extensions[kind]
        if not isinstance(saved, dict):
            return f"{kind} is {type(saved).__name__}, not an object"
        problem = _average_problem(saved, kind, iteration, model)
        if problem is not None:
            return f"{kind}/{problem}"
    return None


def _average_problem(saved: dict, kind: str, iteration: int, model: dict) -> str | None:
    count, params = saved.get("count"), saved.get("params")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= iteration + 1:
        return (f"count is {count!r}, not a number of averaged values (an integer from 0 to "
                f"{iteration + 1})")
    if kind == EMA:
        decay = saved.get("decay")
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
            return f"decay is {decay!r}, not a number in [0, 1)"
        if params is None:
            return "params is null: an EMA holds its average from the run's start"
    elif (params is None) != (count == 0):
        return f"params is {'null' if params is None else 'an average'} with count {count}"
    if params is None:
        return None
    if not isinstance(params, dict) or not params:
        return "params is not an object of arrays by parameter path"
    for path, average in params.items():
        live = model.get(path)
        if not isinstance(average, numpy.ndarray) or average.dtype.kind != "f" or \
                not isinstance(live, numpy.ndarray) or average.shape != live.shape:
            return (f"params/{path} is not an average of the model's parameter {path} "
                    f"(of shape {getattr(live, 'shape', None)})")
        if not numpy.isfinite(average).all() and numpy.isfinite(live).all():
            return (f"params/{path} holds values that are not finite (NaN or infinite), "
                    "though the parameter holds none")
    return None
