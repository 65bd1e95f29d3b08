"""The training loop, its triggers and its extensions."""

from .trainer import PRIORITY_EDITOR, PRIORITY_READER, PRIORITY_WRITER, Trainer
from .triggers import AnyOf, IntervalTrigger, StopTrigger

__all__ = ["AnyOf", "IntervalTrigger", "PRIORITY_EDITOR", "PRIORITY_READER", "PRIORITY_WRITER",
           "StopTrigger", "Trainer"]
