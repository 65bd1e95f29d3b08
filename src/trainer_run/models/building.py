"""A model from its config section: the ``model`` group's ``_target_`` with what the run knows.

The target receives the section's keys and, when it takes them, the standard arguments the
data and the backend fix: ``in_size``, ``in_shape`` (one example's shape), ``out_size``
(also as ``vocab_size``, a language model's name for it), ``backend``, ``dtype`` (the
backend's compute dtype) and ``task``. A class that is not a
model (:data:`KIND`) is refused before it is called; what a factory returns is checked too.
The section's ``freeze``, ``lr_mult`` and ``wd_mult`` are the runner's
(:mod:`.parameter_rules`), never the target's.
The run and :func:`trainer_run.load_model` build their models here.
"""

from __future__ import annotations

from ..errors import check
from ..own_gradients import has_own_gradients
from ..targets import TARGET, Kind, arguments, call, instances_callable
from . import parameter_rules


def is_model(obj) -> bool:
    """Whether ``obj`` (a model, or a class of models) has ``params()`` and is called with a
    batch or computes its own gradients (``loss_and_grads``)."""
    return callable(getattr(obj, "params", None)) and (instances_callable(obj)
                                                       or has_own_gradients(obj))


KIND = Kind("a model: an object with params() that is called with a batch (subclass "
            "trainer_run.models.Model or Module) or has loss_and_grads(*batch) "
            "(trainer_run.own_gradients)", fits=is_model)


def build_model(section: dict, data, backend, shared=None):
    """The model ``section`` names, for ``data`` (its ``in_size``, ``in_shape``, ``out_size``,
    ``task``) with its parameters in ``backend``'s compute dtype; a model that takes ``task``
    is told the data's and may refuse it. ``shared``: the group's shared keys."""
    check("dtype" not in section, "model.dtype is set by the precision group: choose "
          "precision=fp32 or precision=fp16 instead")
    dtype = str(backend.dtype)
    standard = {"in_size": data.in_size, "in_shape": data.in_shape, "out_size": data.out_size,
                "vocab_size": data.out_size, "backend": backend, "dtype": dtype, "task": data.task}
    factory, kwargs, fixed = arguments("model", section, standard, runner=parameter_rules.KEYS,
                                       shared=shared, kind=KIND)
    check(dtype == "float32" or "dtype" in fixed,
          f"precision needs a model that takes a dtype argument; {section[TARGET]} does not")
    return call("model", factory, kwargs, kind=KIND, target=section[TARGET], **fixed)
