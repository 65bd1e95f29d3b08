"""The training loop, its triggers and its extensions."""

from .extension import PRIORITY_EDITOR, PRIORITY_READER, PRIORITY_WRITER, Extension
from .trainer import Trainer
from .triggers import AnyOf, IntervalTrigger, StopTrigger

__all__ = ["AnyOf", "Extension", "IntervalTrigger", "PRIORITY_EDITOR", "PRIORITY_READER",
           "PRIORITY_WRITER", "StopTrigger", "Trainer"]
