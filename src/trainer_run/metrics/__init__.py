"""Metrics of an evaluated split computed from its predictions and labels, beside the model's
own batch-averaged ``loss`` and ``accuracy``: the config key ``metrics`` (:mod:`.selection`),
the functions on NumPy arrays (:mod:`.classification`, :mod:`.regression`, each equal to
scikit-learn's), their computation over a split (:mod:`.run_metrics`) and the confusion
matrix's files (:mod:`.confusion_files`). See docs/logging.md, "Metrics of the evaluated splits"."""

from .run_metrics import RunMetrics, build  # noqa: F401
