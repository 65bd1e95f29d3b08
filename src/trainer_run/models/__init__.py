"""Models: the model protocol and its base classes (``base``), and the built-in architectures,
written as ordinary user-style models: ``mlp`` (MLP, logistic regression)."""

from .base import (
    TASKS,
    Linear,
    Model,
    Module,
    evaluating,
    flat,
    persistents_of,
    set_mode,
    summary,
)
from .mlp import MLP, LogisticRegression

__all__ = ["MLP", "TASKS", "Linear", "LogisticRegression", "Model", "Module", "evaluating", "flat",
           "persistents_of", "set_mode", "summary"]
