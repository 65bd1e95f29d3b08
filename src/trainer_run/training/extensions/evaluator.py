"""Evaluator: the model's metrics on a validation set, averaged over its examples."""

from __future__ import annotations

import numpy

from ... import host_reads
from ...autograd import as_data, no_grad
from ...backend import array_module
from ...converter import batch_of, concat_examples
from ...module import evaluating
from ...own_gradients import outputs
from ...user_code import blame
from ..extension import PRIORITY_WRITER, Extension


class Evaluator(Extension):
    """Runs the model over ``dataset`` once per trigger and reports ``<prefix><metric>``.

    Each metric the model returns (``loss``, ``accuracy``, ...) is averaged over all
    examples (batches weighted by their size). The model runs in evaluation mode (its mode is
    restored after), no graph is recorded and no parameter or random state changes, so
    evaluating never alters training. What the model raises names it (config key ``model``,
    :func:`trainer_run.user_code.blame`). ``prefix`` must end in ``/``: the keys of a writer
    are told from the training step's by it (:func:`~..trainer.from_update`).

    With ``metrics`` (the run's :class:`~trainer_run.metrics.RunMetrics`, the config key
    ``metrics``), the model's outputs (``forward``) and the labels of every batch are gathered
    too, and the metrics of the whole split computed from them are reported beside the
    model's (``<prefix>f1_macro``, ...).
    """

    priority = PRIORITY_WRITER
    name = "evaluator"

    def __init__(self, dataset, model, batch_size: int, backend=None, prefix: str = "val/",
                 converter=concat_examples, metrics=None):
        self.dataset = dataset
        self.metrics = metrics
        self.model = model
        self.batch_size = batch_size
        self.backend = backend
        if not prefix.endswith("/"):
            raise ValueError(f"an evaluator's prefix must end in '/' (e.g. 'val/'), got {prefix!r}")
        self.prefix = prefix
        self.converter = converter

    def __call__(self, trainer) -> None:
        trainer.updater.settle()
        trainer.observation.update(self.evaluate())

    def evaluate(self) -> dict:
        totals: dict = {}
        n = len(self.dataset)
        quiet = numpy.errstate(over="ignore", invalid="ignore", divide="ignore")
        gathered = self.metrics.gathering(self.model) if self.metrics is not None else None
        with no_grad(), evaluating(self.model), quiet:
            for start in range(0, n, self.batch_size):
                indices = range(start, min(start + self.batch_size, n))
                arrays = self._batch(indices)
                with blame("model", self.model):
                    metrics = outputs(self.model, arrays)
                    if gathered is not None:
                        gathered.add(arrays)
                for key, value in metrics.items():
                    value = as_data(value)
                    value = array_module(value).asarray(value, dtype=numpy.float64) * len(indices)
                    totals[key] = totals[key] + value if key in totals else value
        names = list(totals)
        found = {self.prefix + k: v / n
                 for k, v in zip(names, host_reads.scalars([totals[k] for k in names]))}
        if gathered is not None:
            found.update(self.metrics.compute(gathered, self.prefix))
        return found

    def _batch(self, indices):
        if self.converter is concat_examples:
            return batch_of(self.dataset, indices, self.backend)
        return self.converter([self.dataset[i] for i in indices], self.backend)
