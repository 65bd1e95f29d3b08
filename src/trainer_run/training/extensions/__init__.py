"""Extensions of the training loop: evaluation, logging, console output, checkpoints, summary."""

from .evaluator import Evaluator
from .held_out import HeldOutEvaluator
from .log_report import LogReport
from .plateau import PlateauStep
from .progress import MetricsTable, ProgressBar
from .snapshot import Snapshot
from .summary import Summary

__all__ = ["Evaluator", "HeldOutEvaluator", "LogReport", "MetricsTable", "PlateauStep",
           "ProgressBar", "Snapshot", "Summary"]
