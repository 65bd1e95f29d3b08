"""Extensions of the training loop: evaluation, logging, console output, checkpoints, summary."""

from .evaluator import Evaluator
from .held_out import HeldOutEvaluator
from .log_report import LogFinish, LogReport
from .objective import EarlyStopping, Objective
from .plateau_step import PlateauStep
from .profile_report import ProfileReport
from .progress import MetricsTable, Progress, Readout
from .snapshot import Snapshot
from .summary_writer import Summary

__all__ = ["EarlyStopping", "Evaluator", "HeldOutEvaluator", "LogFinish", "LogReport", "MetricsTable",
           "Objective", "PlateauStep", "ProfileReport", "Progress", "Readout", "Snapshot",
           "Summary"]
