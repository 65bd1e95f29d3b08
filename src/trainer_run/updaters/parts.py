"""An updater's parts from plain values: the built objects
:class:`~.standard.StandardUpdater` takes (its :class:`~.batches.Batches`, its
:class:`~.verdict.Verdict` and its sync object, :mod:`.sync`), made from the numbers and
objects a config or a Python user names. A run's updater is built with them
(:func:`trainer_run.runner.build.build_updater`); so is one made in Python with
:func:`updater_of`::

    updater_of(StandardUpdater, iterator, optimizer, model, backend=backend, accum_grad=4)
"""

from __future__ import annotations

import inspect
from typing import Callable

from ..converter import concat_examples
from ..errors import check
from .batches import Batches
from .clipping import global_norm_clip
from .device_verdict import verdict_for
from .divergence import NanPolicy
from .gradient_sync import GradientSync
from .server_sync import ServerSync
from .sync import Sync


def parts_of(backend=None, converter: Callable = concat_examples, accum_grad: int = 1,
             prefetch: int = 0, transforms=None, workers: int = 0, kvstore=None,
             asynchronous: bool = False, nan_policy: str = "stop",
             max_skipped_in_a_row: int | None = 100, loss_scaler=None,
             clip_global_norm=None) -> dict:
    """An updater's ``batches``, ``verdict`` and ``sync``, as keyword arguments:

    - ``batches``: a :class:`~.batches.Batches` of ``accum_grad`` batches per update,
      converted by ``converter`` onto ``backend`` (None: NumPy on the host), ``prefetch``
      batches gathered ahead, ``transforms`` (an
      :class:`~trainer_run.data.augmentation.Augmentation`, None: none) and ``workers``
      threads (``dataset.workers``);
    - ``verdict``: ``nan_policy`` (``"stop"`` or ``"skip"``, :mod:`.divergence`) and
      ``max_skipped_in_a_row``, ``loss_scaler`` (a :class:`~trainer_run.loss_scaling.LossScaler`,
      None: no scaling) and ``clip_global_norm`` (the largest global norm of the gradients,
      None: no clipping, :mod:`.clipping`), decided on the device for a ``deferred`` backend
      (:func:`.device_verdict.verdict_for`);
    - ``sync``: ``kvstore``'s (from :func:`trainer_run.kvstore.create`; None: nothing to sum,
      :class:`~.sync.Sync`): :class:`~.server_sync.ServerSync` when ``asynchronous`` (a
      ``dist_async`` store whose server applies the optimizer), else
      :class:`~.gradient_sync.GradientSync`.
    """
    check(kvstore is not None or not asynchronous, "asynchronous updates are a dist_async "
          "kvstore's; this updater has no kvstore")
    nan = NanPolicy(nan_policy, max_skipped_in_a_row)
    clip = global_norm_clip(clip_global_norm, asynchronous)
    sync = Sync() if kvstore is None else ServerSync(kvstore) if asynchronous else GradientSync(kvstore)
    return {"batches": Batches(backend, converter, accum_grad, prefetch, transforms, workers),
            "verdict": verdict_for(nan, loss_scaler, clip, backend, asynchronous),
            "sync": sync}


PLAIN = tuple(inspect.signature(parts_of).parameters)
"""The plain values :func:`parts_of` builds the parts from."""


def updater_of(cls, iterator, optimizer, model, **values):
    """``cls(iterator, optimizer, model, ...)`` (a :class:`~.standard.StandardUpdater` or a
    subclass) with the parts that the keys of ``values`` named in :data:`PLAIN` make
    (:func:`parts_of`), and its other keys (``loss_func``, ``callbacks``, ``profiler``,
    ``devices``, ``grad_reduce``) as they are."""
    plain = {k: values.pop(k) for k in PLAIN if k in values}
    return cls(iterator, optimizer, model, **parts_of(**plain), **values)
