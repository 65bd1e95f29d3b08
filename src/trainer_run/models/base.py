"""The task head shared by the built-in models: :class:`Model` (``forward`` plus the loss and
metrics of its task), :func:`flat`, and the language models' :func:`sequence_metrics`."""

from __future__ import annotations

from ..functions import accuracy, mean_squared_error, softmax_cross_entropy
from ..module import Module

TASKS = ("classification", "regression")


def flat(x):
    """``x`` with every axis after the first flattened into one: images ``(N, C, H, W)``
    become rows of ``C * H * W`` features."""
    return x if x.ndim == 2 else x.reshape(len(x), -1)


def sequence_metrics(logits, targets) -> dict:
    """A language model's loss and metrics from its logits ``(B, T, V)`` and next-token targets
    ``(B, T)``: ``loss``, the mean cross entropy over every position whose target is not -1, and
    ``accuracy``, the fraction of those positions whose largest logit is the target."""
    return {"loss": softmax_cross_entropy(logits, targets, ignore_index=-1),
            "accuracy": accuracy(logits, targets, ignore_index=-1)}


class Model(Module):
    """A predictor with a task head: ``model(x, t)`` returns the loss and metrics.

    ``task="classification"``: softmax cross entropy and accuracy against class ids.
    ``task="regression"``: mean squared error against targets.
    """

    task = "classification"

    def forward(self, x):
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def __call__(self, x, t):
        y = self.forward(x)
        if self.task == "classification":
            return {"loss": softmax_cross_entropy(y, t), "accuracy": accuracy(y, t)}
        return {"loss": mean_squared_error(y, t)}
