"""The metrics a run computes on each evaluated split: :class:`RunMetrics` gathers the model's
outputs and the labels over the split's batches (:class:`Gathered`) and computes the chosen
metrics (:mod:`.selection`) once, on the whole split, as observations of the split's prefix.

A sequence model's outputs ``(N, T, classes)`` against labels ``(N, T)`` count each position
as one example (``val/perplexity`` is then the exponential of the mean cross-entropy over every
position of the split).

How each kind is reported, with the prefix ``val/``:

- one number: ``val/<name>`` (``val/f1_macro``, ``val/top_5_accuracy``, ``val/mae``);
- one number per class (``precision``, ``recall``): ``val/<name>/<class>``, ``<class>`` the
  dataset's class name (:func:`class_keys`) or the class id;
- the confusion matrix: no observation; it goes to ``matrices`` (a callable of the prefix, the
  matrix and the class names: in a run, :class:`~.confusion_files.ConfusionFiles`);
- a user's metric: ``val/<name>`` for a number, ``val/<name>/<key>`` for each entry of a dict.
"""

from __future__ import annotations

import numbers
import re

import numpy

from .. import host_reads, prediction
from ..backend import array_module
from ..errors import ConfigError, UserCodeError
from ..user_code import blame, broke, described, name_of
from . import selection
from .selection import MATRIX, PER_CLASS, USERS


class Gathered:
    """The model's outputs (``forward``) and the labels (a batch's last array) of each batch
    of a split, kept on their device until :meth:`arrays` reads them to the host at once."""

    def __init__(self, model):
        self.model = model
        self.forward = model.forward
        self.outputs: list = []
        self.labels: list = []

    def add(self, batch: tuple) -> None:
        """Runs ``forward`` on ``batch[0]`` (:func:`trainer_run.prediction.batch_outputs`)."""
        self.outputs.append(prediction.batch_outputs(self.forward, batch[0]))
        self.labels.append(batch[-1])

    def arrays(self) -> tuple[numpy.ndarray, numpy.ndarray]:
        """The outputs ``(N, ...)`` and the labels ``(N, ...)`` of the whole split, as NumPy
        arrays (one read each)."""
        xp = array_module(self.outputs[0])
        return (host_reads.array(xp.concatenate(self.outputs)),
                host_reads.array(xp.concatenate([xp.asarray(t) for t in self.labels])))


class RunMetrics:
    """The metrics of the config's ``metrics`` (:func:`build`) for a run of ``task`` whose
    classes are named ``classes`` (None: by id); ``matrices`` receives each confusion matrix
    (None: it is not kept)."""

    def __init__(self, chosen: list, task: str, classes: list | None = None, matrices=None):
        self.chosen = chosen
        self.task = task
        self.classes = classes
        self.matrices = matrices

    def per_class(self, key: str) -> bool:
        """Whether the logged ``key`` is one class's value of a per-class metric
        (``val/recall/<class>``)."""
        parts = key.split("/")
        return len(parts) >= 3 and any(m.kind == PER_CLASS and m.name == parts[-2]
                                       for m in self.chosen)

    def gathering(self, model) -> Gathered:
        """A new gathering of ``model``'s outputs for one evaluation."""
        return Gathered(model)

    def compute(self, gathered: Gathered, prefix: str) -> dict:
        """The metrics of the split gathered in ``gathered``, keyed ``<prefix><name>`` (see
        the module docstring); nothing for a split of no examples."""
        if not gathered.outputs:
            return {}
        y_pred, y_true = gathered.arrays()
        _check_shapes(gathered.model, self.task, y_pred, y_true)
        if self.task == selection.CLASSIFICATION:
            y_pred = y_pred.reshape(-1, y_pred.shape[-1])  # a sequence's positions as rows
            y_true = y_true.astype(numpy.int64).reshape(-1)
        y_pred.flags.writeable = y_true.flags.writeable = False  # a user's metric reads them only
        names = class_keys(self.classes, y_pred.shape[1] if y_pred.ndim > 1 else 1)
        found: dict = {}
        for metric in self.chosen:
            if metric.kind == USERS:
                found.update(_users(metric, y_pred, y_true, prefix))
                continue
            value = metric.compute(y_pred, y_true)
            if metric.kind == MATRIX:
                if self.matrices is not None:
                    self.matrices(prefix, value, names)
            elif metric.kind == PER_CLASS:
                found.update({f"{prefix}{metric.name}/{c}": float(v) for c, v in zip(names, value)})
            else:
                found[f"{prefix}{metric.name}"] = float(value)
        return found


def build(entries, task: str, model, out_size: int | None, classes: list | None = None,
          matrices=None) -> RunMetrics | None:
    """The run's metrics from the config's ``metrics`` list ``entries`` (None when it is
    empty): checked (:func:`.selection.chosen`) for a run of ``task`` whose model gives
    ``out_size`` outputs, and refused in one line for a ``model`` without ``forward(x)``, which
    every metric needs. ``classes`` and ``matrices``: as :class:`RunMetrics` takes them."""
    chosen = selection.chosen(entries, task, out_size if task == selection.CLASSIFICATION else None)
    if not chosen:
        return None
    if not callable(getattr(model, "forward", None)):
        raise ConfigError(f"metrics={[m.name for m in chosen]} are computed from the model's "
                          f"predictions and {type(model).__name__} has no forward(x): give it one "
                          "that returns a batch's outputs (logits for a classifier), or set metrics=[]")
    return RunMetrics(chosen, task, classes, matrices)


def _check_shapes(model, task: str, y_pred: numpy.ndarray, y_true: numpy.ndarray) -> None:
    """Refuses outputs the metrics of ``task`` cannot read, naming the model: a classifier's
    must be one score per class, ``(N, classes)``, or per class and position of a sequence,
    ``(N, T, classes)`` against labels ``(N, T)``; a regression's one value per target."""
    sequence = y_pred.ndim == 3 and y_true.shape == y_pred.shape[:2]
    if task == selection.CLASSIFICATION and y_pred.ndim != 2 and not sequence:
        raise broke("model", model, "forward", f"returned outputs of shape {y_pred.shape}; "
                    "classification metrics read one score per class, (N, classes), or per "
                    "position of a sequence, (N, T, classes) for labels (N, T)")
    if task != selection.CLASSIFICATION and y_pred.size != y_true.size:
        raise broke("model", model, "forward", f"returned outputs of shape {y_pred.shape} for "
                    f"targets of shape {y_true.shape}; regression metrics compare them value by "
                    "value")


KEY_CHARACTERS = re.compile(r"[^\w.\-]+")


def class_keys(classes: list | None, count: int) -> list[str]:
    """How each of ``count`` classes is named in a metric's key: its name in ``classes``
    with every run of characters other than letters, digits, ``_``, ``.`` and ``-`` made one
    ``_`` (``T-shirt/top`` -> ``T-shirt_top``); its id when there are no names, when their
    number is not ``count``, or when two names would give one key."""
    if classes is None or len(classes) != count:
        return [str(i) for i in range(count)]
    keys = [KEY_CHARACTERS.sub("_", str(name)) for name in classes]
    if len(set(keys)) != len(keys) or "" in keys:
        return [str(i) for i in range(count)]
    return keys


def _users(metric, y_pred: numpy.ndarray, y_true: numpy.ndarray, prefix: str) -> dict:
    """A user's metric's value(s) as observations; anything but a number or a dict of numbers
    by name is a UserCodeError naming it."""
    with blame(metric.key, metric.compute):
        result = metric.compute(y_pred, y_true)
    if isinstance(result, dict):
        values = {f"{prefix}{metric.name}/{k}": _number(v) for k, v in result.items()
                  if isinstance(k, str)}
        if len(values) == len(result) and None not in values.values():
            return values
    elif _number(result) is not None:
        return {f"{prefix}{metric.name}": _number(result)}
    raise UserCodeError(f"{described(metric.key, metric.compute)} returned "
                        f"{type(result).__name__} {_shown(result)}; a metric returns a float, or "
                        "a dict of floats by name", metric.key, name_of(metric.compute))


def _number(value) -> float | None:
    """``value`` as a float when it is one real number (a Python or NumPy number, an array of
    one element); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, numpy.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
        return float(value.reshape(()))
    return None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
