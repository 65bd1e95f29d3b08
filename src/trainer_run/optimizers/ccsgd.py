"""MXNet's deprecated ``ccSGD`` (registered as ``ccsgd``): the same optimizer as SGD.

MXNet 1.9.1 keeps ``class ccSGD(SGD)`` "for backward compatibility"; it adds nothing, so
the update rule, state layout (``(momentum, master)`` with ``multi_precision``), fused and
compiled paths are SGD's (see :mod:`.sgd`).
"""

from __future__ import annotations

from .optimizer import register
from .sgd import SGD


@register
class ccSGD(SGD):
    """[DEPRECATED] Same as :class:`~trainer_run.optimizers.sgd.SGD`."""
